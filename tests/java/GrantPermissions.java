// Grants HBase permissions through HBase's Java client (AccessControlClient.grant, what the HBase shell's `grant`
// runs) as an HBase superuser logged in from a keytab (tests only: the Thrift1 gateway has no grant call), with
// the secured HBase's configuration folder on the class path. Usage: GrantPermissions PRINCIPAL KEYTAB, and on
// stdin one grant a line: USER<TAB>TABLE (or @NAMESPACE)<TAB>FAMILY<TAB>QUALIFIER<TAB>LETTERS (empty: none).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.security.access.AccessControlClient;
import org.apache.hadoop.hbase.security.access.Permission;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.security.UserGroupInformation;

public class GrantPermissions {
  static Permission.Action[] actions(String letters) {
    List<Permission.Action> found = new ArrayList<>();
    for (char letter : letters.toCharArray()) {
      switch (letter) {
        case 'R': found.add(Permission.Action.READ); break;
        case 'W': found.add(Permission.Action.WRITE); break;
        case 'X': found.add(Permission.Action.EXEC); break;
        case 'C': found.add(Permission.Action.CREATE); break;
        case 'A': found.add(Permission.Action.ADMIN); break;
        default: throw new IllegalArgumentException("unknown permission " + letter);
      }
    }
    return found.toArray(new Permission.Action[0]);
  }

  static byte[] orNull(String part) {
    return part.isEmpty() ? null : Bytes.toBytes(part);
  }

  public static void main(String[] args) throws Throwable {
    Configuration conf = HBaseConfiguration.create();
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(args[0], args[1]);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    try (Connection connection = ConnectionFactory.createConnection(conf)) {
      for (String line; (line = in.readLine()) != null; ) {
        if (line.isEmpty()) continue;
        String[] f = line.split("\t", -1);
        if (f[1].startsWith("@")) {
          AccessControlClient.grant(connection, f[1].substring(1), f[0], actions(f[4]));
        } else {
          AccessControlClient.grant(
              connection, TableName.valueOf(f[1]), f[0], orNull(f[2]), orNull(f[3]), actions(f[4]));
        }
        System.out.println("granted " + line.replace('\t', ' '));
      }
    }
  }
}
