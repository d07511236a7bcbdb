// The standalone HBase's region server with HBase's own Thrift1 gateway running inside it: the launcher names
// this class as hbase.regionserver.impl, so `HMaster start` (master + this region server + ZooKeeper in one JVM)
// starts it in place of HRegionServer. The gateway's handler takes its tables from the region server's own cluster
// connection, a short-circuit connection whose calls to regions this server hosts go straight to its RPC service
// object: a put skips the protobuf encoding, the loopback RPC and the hop between two JVMs of a separate gateway.
// Everything else is HBase's stock ThriftServer (the -threadpool server, its handler and metrics).
// Compiled on first use into the launcher's home. Configuration (-D on the HMaster command line):
//   tms.thrift.bind, tms.thrift.port   where the gateway listens
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.regionserver.HRegionServer;
import org.apache.hadoop.hbase.security.UserProvider;
import org.apache.hadoop.hbase.thrift.HBaseServiceHandler;
import org.apache.hadoop.hbase.thrift.ThriftHBaseServiceHandler;
import org.apache.hadoop.hbase.thrift.ThriftServer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class ThriftRegionServer extends HRegionServer {
  private static final Logger LOG = LoggerFactory.getLogger(ThriftRegionServer.class);
  private volatile ThriftServer thrift;

  public ThriftRegionServer(Configuration conf) throws IOException {
    super(conf);
  }

  /** The region server's life, with the gateway serving from the moment it is online until it stops. */
  @Override
  public void run() {
    Thread gateway = new Thread(this::serveThrift, "tms-thrift-gateway");
    gateway.setDaemon(true);
    gateway.start();
    try {
      super.run();
    } finally {
      ThriftServer server = thrift;
      if (server != null) {
        LOG.info("region server stopped: stopping the Thrift gateway");
        server.stop();
      }
    }
  }

  private void serveThrift() {
    waitForServerOnline();
    if (isStopped()) {
      return;
    }
    Configuration conf = new Configuration(getConfiguration());
    String[] args = {
      "-b", conf.get("tms.thrift.bind", "127.0.0.1"),
      "-p", conf.get("tms.thrift.port", "9090"),
      "--infoport", "-1",
      "-threadpool",
      "start",
    };
    Connection connection = getConnection();
    thrift = new ThriftServer(conf) {
      @Override
      protected HBaseServiceHandler createHandler(Configuration c, UserProvider users) throws IOException {
        return new ShortCircuitHandler(c, users, connection);
      }
    };
    try {
      LOG.info("Thrift gateway in the region server's JVM, on its short-circuit connection: {}", String.join(" ", args));
      thrift.run(args);
    } catch (Throwable e) {
      // A gateway that cannot serve (its port taken) leaves an HBase no client can reach: say so and stop the JVM
      // so that the launcher reports the failure instead of waiting for a port that never answers.
      LOG.error("the Thrift gateway failed; exiting", e);
      Runtime.getRuntime().halt(1);
    }
  }

  /** HBase's Thrift1 handler with its tables and admin from the region server's short-circuit connection. */
  static final class ShortCircuitHandler extends ThriftHBaseServiceHandler {
    private final Connection connection;
    private final Admin admin;

    ShortCircuitHandler(Configuration conf, UserProvider users, Connection connection) throws IOException {
      super(conf, users);
      this.connection = connection;
      this.admin = connection.getAdmin();
    }

    @Override
    protected Table getTable(byte[] name) throws IOException {
      return connection.getTable(TableName.valueOf(name));
    }

    @Override
    protected Admin getAdmin() {
      return admin;
    }
  }
}
