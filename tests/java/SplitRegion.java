// Splits an HBase table at a row key and waits until both daughters are online (tests only:
// the Thrift1 gateway has no split call). Usage: SplitRegion ZK_PORT TABLE HEX_SPLIT_KEY
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;

public class SplitRegion {
  /** True once every region of the table has a server (the daughters of a split are assigned). */
  static boolean allAssigned(Connection connection, TableName table) throws Exception {
    try (RegionLocator locator = connection.getRegionLocator(table)) {
      for (HRegionLocation location : locator.getAllRegionLocations()) {
        if (location == null || location.getServerName() == null) return false;
      }
      return true;
    }
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", "127.0.0.1");
    conf.set("hbase.zookeeper.property.clientPort", args[0]);
    TableName table = TableName.valueOf(args[1]);
    byte[] key = new byte[args[2].length() / 2];
    for (int i = 0; i < key.length; i++) {
      key[i] = (byte) Integer.parseInt(args[2].substring(2 * i, 2 * i + 2), 16);
    }
    try (Connection connection = ConnectionFactory.createConnection(conf); Admin admin = connection.getAdmin()) {
      int before = admin.getRegions(table).size();
      admin.split(table, key);
      long deadline = System.currentTimeMillis() + 60_000;
      while (admin.getRegions(table).size() <= before || !allAssigned(connection, table)) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException("split did not happen");
        Thread.sleep(200);
      }
    }
  }
}
