// The admin calls the Thrift1 gateway lacks, for the local HBase cluster's fault helpers (cluster.py), through
// HBase's Java client, with the cluster's hbase-site.xml on the class path (its ZooKeeper and znode).
// Compiled on first use into the cluster's home. Usage:
//   ClusterAdmin regions TABLE            -> JSON list of {name, start, end, server} (keys in hex)
//   ClusterAdmin move ENCODED [SERVER]    -> the server it is open on afterwards
//   ClusterAdmin split TABLE [HEX_KEY]    -> waits until the daughters are open (no key: flush, midpoint)
//   ClusterAdmin balance
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.util.Bytes;

public class ClusterAdmin {
  static final long WAIT_MS = 120_000;

  static String hex(byte[] b) {
    StringBuilder s = new StringBuilder();
    for (byte x : b) s.append(String.format("%02x", x));
    return s.toString();
  }

  static byte[] unhex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    return b;
  }

  /** Every region of the table with its server, fresh from hbase:meta; null if one has no server yet. */
  static List<HRegionLocation> locations(Connection connection, TableName table) throws Exception {
    try (RegionLocator locator = connection.getRegionLocator(table)) {
      List<HRegionLocation> all = locator.getAllRegionLocations();
      for (HRegionLocation location : all) {
        if (location == null || location.getServerName() == null) return null;
      }
      return all;
    }
  }

  static void regions(Connection connection, TableName table) throws Exception {
    List<HRegionLocation> all = null;
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while ((all = locations(connection, table)) == null) {
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("regions not all assigned");
      Thread.sleep(200);
    }
    StringBuilder out = new StringBuilder("[");
    for (HRegionLocation location : all) {
      RegionInfo region = location.getRegion();
      if (out.length() > 1) out.append(",");
      out.append(String.format("{\"name\":\"%s\",\"start\":\"%s\",\"end\":\"%s\",\"server\":\"%s\"}",
          region.getEncodedName(), hex(region.getStartKey()), hex(region.getEndKey()), location.getServerName()));
    }
    System.out.println(out.append("]"));
  }

  static ServerName serverOf(Admin admin, String encoded) throws Exception {
    for (ServerName server : admin.getRegionServers()) {
      for (RegionInfo region : admin.getRegions(server)) {
        if (region.getEncodedName().equals(encoded)) return server;
      }
    }
    return null;
  }

  static void move(Admin admin, String encoded, String target) throws Exception {
    ServerName from = serverOf(admin, encoded);
    ServerName to = null;
    if (target != null) {
      to = ServerName.valueOf(target);
    } else {
      List<ServerName> others = new ArrayList<>(admin.getRegionServers());
      others.remove(from);
      if (others.isEmpty()) throw new IllegalStateException("no other region server to move to");
      to = others.get((int) (System.nanoTime() % others.size()));
    }
    admin.move(Bytes.toBytes(encoded), to);  // returns once the move procedure has finished
    long deadline = System.currentTimeMillis() + WAIT_MS;
    ServerName now;
    while (!to.equals(now = serverOf(admin, encoded))) {
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("region is on " + now);
      Thread.sleep(200);
    }
    System.out.println(to);
  }

  static void split(Connection connection, Admin admin, TableName table, String key) throws Exception {
    int before = admin.getRegions(table).size();
    if (key.isEmpty()) {
      // The midpoint comes from store files: flush, then split the last region that has one (the last
      // region is where a topic's new messages go).
      admin.flush(table);
      List<RegionInfo> regions = new ArrayList<>(admin.getRegions(table));
      Exception refused = null;
      boolean done = false;
      for (int i = regions.size() - 1; i >= 0 && !done; i--) {
        try {
          admin.splitRegionAsync(regions.get(i).getRegionName()).get();
          done = true;
        } catch (Exception e) {
          refused = e;
        }
      }
      if (!done) throw refused;
    }
    else admin.split(table, unhex(key));
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (admin.getRegions(table).size() <= before || locations(connection, table) == null) {
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("split did not happen");
      Thread.sleep(200);
    }
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    try (Connection connection = ConnectionFactory.createConnection(conf); Admin admin = connection.getAdmin()) {
      switch (args[0]) {
        case "regions":
          regions(connection, TableName.valueOf(args[1]));
          break;
        case "move":
          move(admin, args[1], args.length > 2 ? args[2] : null);
          break;
        case "split":
          split(connection, admin, TableName.valueOf(args[1]), args.length > 2 ? args[2] : "");
          break;
        case "balance":
          admin.balancerSwitch(true, true);
          System.out.println(admin.balance());
          break;
        default:
          throw new IllegalArgumentException("unknown command " + args[0]);
      }
    }
  }
}
