/*
 * Drives real Apache Tephra 0.16.1 for tests/integration/test_tephra_compat.py; compiled at test time with
 * javac against the jars tests/tephra/pom.xml resolves (see tests/tephra/launcher.py).
 *
 *   server <port> <zk-data-dir>   ZooKeeper in this JVM (Twill's InMemoryZKServer, loopback) and Tephra's own
 *                                 TransactionServiceMain on 127.0.0.1:<port>, state in memory (tx.persist=false),
 *                                 timeouts checked every second; runs until SIGTERM or until its stdin closes.
 *   encode <tx>...                one line per transaction: hex of org.apache.tephra.TransactionCodec.encode.
 *   decode <hex>...               one line per input: TransactionCodec.decode, printed as a <tx> spec.
 *
 * A <tx> spec is id:readPointer:writePointer:invalids:inProgress:firstShort:type:checkpoints:visibility, lists
 * comma-separated (empty for none), type SHORT or LONG, visibility SNAPSHOT, SNAPSHOT_EXCLUDE_CURRENT or
 * SNAPSHOT_ALL.
 */

import java.io.File;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.tephra.Transaction;
import org.apache.tephra.TransactionCodec;
import org.apache.tephra.TransactionServiceMain;
import org.apache.tephra.TransactionType;
import org.apache.twill.internal.zookeeper.InMemoryZKServer;

public final class TephraCompat {

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      throw new IllegalArgumentException("usage: TephraCompat server|encode|decode ...");
    }
    TransactionCodec codec = new TransactionCodec();
    switch (args[0]) {
      case "server":
        server(Integer.parseInt(args[1]), new File(args[2]));
        break;
      case "encode":
        for (int i = 1; i < args.length; i++) {
          System.out.println(hex(codec.encode(parse(args[i]))));
        }
        break;
      case "decode":
        for (int i = 1; i < args.length; i++) {
          System.out.println(format(codec.decode(unhex(args[i]))));
        }
        break;
      default:
        throw new IllegalArgumentException("unknown command " + args[0]);
    }
  }

  private static void server(int port, File zkDir) throws Exception {
    InMemoryZKServer zk = InMemoryZKServer.builder().setDataDir(zkDir).setAutoCleanDataDir(true).build();
    zk.startAndWait();
    String quorum = "127.0.0.1:" + zk.getLocalAddress().getPort();
    System.err.println("tephra-compat: ZooKeeper at " + quorum);

    Configuration conf = new Configuration(false);
    conf.set("data.tx.zookeeper.quorum", quorum);
    conf.set("data.tx.bind.address", "127.0.0.1");
    conf.setInt("data.tx.bind.port", port);
    conf.setBoolean("tx.persist", false);
    conf.setInt("data.tx.server.threads", 4);
    conf.setInt("data.tx.server.io.threads", 1);
    conf.setInt("zookeeper.session.timeout", 10000);
    conf.setInt("data.tx.cleanup.interval", 1);  // seconds: timed-out transactions become invalid quickly
    // Stop when the test process goes away (our stdin closes), even if it was killed without cleaning up.
    Thread watchdog = new Thread(() -> {
      try {
        while (System.in.read() != -1) {
          // nothing is sent; wait for end of file
        }
      } catch (Exception ignored) {
        // treat a broken stdin like end of file
      }
      System.err.println("tephra-compat: stdin closed, stopping");
      System.exit(0);
    }, "stdin-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    try {
      new TransactionServiceMain(conf).doMain(new String[0]);
    } catch (Throwable t) {
      // ZooKeeper's threads would keep the JVM alive: fail fast so the test sees it at once
      t.printStackTrace();
      System.exit(1);
    }
  }

  private static Transaction parse(String spec) {
    String[] f = spec.split(":", -1);
    if (f.length != 9) {
      throw new IllegalArgumentException("bad transaction spec " + spec);
    }
    return new Transaction(Long.parseLong(f[1]), Long.parseLong(f[0]), Long.parseLong(f[2]), longs(f[3]),
                           longs(f[4]), Long.parseLong(f[5]), TransactionType.valueOf(f[6]), longs(f[7]),
                           Transaction.VisibilityLevel.valueOf(f[8]));
  }

  private static String format(Transaction tx) {
    return tx.getTransactionId() + ":" + tx.getReadPointer() + ":" + tx.getWritePointer() + ":"
      + join(tx.getInvalids()) + ":" + join(tx.getInProgress()) + ":" + tx.getFirstShortInProgress() + ":"
      + tx.getType() + ":" + join(tx.getCheckpointWritePointers()) + ":" + tx.getVisibilityLevel();
  }

  private static long[] longs(String list) {
    if (list.isEmpty()) {
      return new long[0];
    }
    String[] parts = list.split(",");
    long[] values = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      values[i] = Long.parseLong(parts[i]);
    }
    return values;
  }

  private static String join(long[] values) {
    List<String> parts = new ArrayList<>();
    for (long v : values) {
      parts.add(Long.toString(v));
    }
    return String.join(",", parts);
  }

  private static String hex(byte[] bytes) {
    StringBuilder sb = new StringBuilder();
    for (byte b : bytes) {
      sb.append(String.format("%02x", b & 0xff));
    }
    return sb.toString();
  }

  private static byte[] unhex(String hex) {
    byte[] bytes = new byte[hex.length() / 2];
    for (int i = 0; i < bytes.length; i++) {
      bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return bytes;
  }
}
