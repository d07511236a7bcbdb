// A Kerberos KDC for tests: Apache Kerby's SimpleKdcServer (the KDC HBase's own security tests use), from the jars
// already on the local HBase's class path. It serves one realm over TCP on 127.0.0.1 and writes one keytab per
// identity; the launcher writes the krb5.conf that points clients and servers at it. Compiled on first use.
// Arguments: WORKDIR REALM PORT KEYTAB=PRINCIPAL[,PRINCIPAL...]...   (principals without the realm)
// Prints "ready" once it serves; runs until killed.
import java.io.File;
import org.apache.kerby.kerberos.kerb.server.KdcConfigKey;
import org.apache.kerby.kerberos.kerb.server.SimpleKdcServer;

public class KerberosKdc {
  public static void main(String[] args) throws Exception {
    File work = new File(args[0]);
    String realm = args[1];
    SimpleKdcServer kdc = new SimpleKdcServer();
    kdc.setWorkDir(work);
    kdc.setKdcRealm(realm);
    kdc.setKdcHost("127.0.0.1");
    kdc.setAllowUdp(false);
    kdc.setAllowTcp(true);
    kdc.setKdcTcpPort(Integer.parseInt(args[2]));
    // Tickets as short as a client asks for (Kerby refuses under an hour by default): tests of renewal ask for seconds.
    kdc.getKdcConfig().setLong(KdcConfigKey.MINIMUM_TICKET_LIFETIME, 1L);
    kdc.init();
    for (int i = 3; i < args.length; i++) {
      String[] spec = args[i].split("=", 2);
      String[] principals = spec[1].split(",");
      for (int j = 0; j < principals.length; j++) {
        principals[j] = principals[j] + "@" + realm;
      }
      kdc.createAndExportPrincipals(new File(spec[0]), principals);
    }
    kdc.start();
    System.out.println("ready");
    System.out.flush();
    Thread.currentThread().join();
  }
}
