#!/usr/bin/env bash
# Runs the standalone HBase and HBase's stock Thrift1 gateway as two processes, with the local launcher's
# jars, JDK 17 flags and Thrift mode (the local launcher, launcher/tms_hbase_launcher/local.py, runs the same gateway
# inside the region server's JVM instead; this image keeps HBase's own two-process layout and needs no JDK),
# in the foreground: SIGTERM stops both; if either process dies the other is stopped and the container
# exits non-zero, so the restart policy takes over.
set -euo pipefail
mkdir -p /var/lib/hbase/tmp
java_opts=(
    -XX:+UseG1GC -Djava.net.preferIPv4Stack=true
    -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
    --add-modules jdk.unsupported
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.security.jgss/sun.security.krb5=ALL-UNNAMED
    --add-exports java.base/sun.net.dns=ALL-UNNAMED --add-exports java.base/sun.net.util=ALL-UNNAMED
    -Dlog4j2.configurationFile=/opt/hbase/conf/log4j2.properties
    -cp "/opt/hbase/conf:/opt/hbase/lib/*"
)
java "-Xmx${HBASE_HEAP:-2g}" "${java_opts[@]}" org.apache.hadoop.hbase.master.HMaster start &
master=$!
# Threadpool mode, buffered transport, binary protocol: what happybase speaks. Bound on all of the
# container's addresses so other containers reach it; docker-compose.yml publishes it on 127.0.0.1 only.
java "-Xmx${THRIFT_HEAP:-512m}" "${java_opts[@]}" org.apache.hadoop.hbase.thrift.ThriftServer \
    -b 0.0.0.0 -p 9090 --infoport -1 -threadpool start &
thrift=$!

trap 'kill -TERM "$thrift" "$master" 2>/dev/null; wait; exit 0' TERM INT
set +e
wait -n "$master" "$thrift"
status=$?
echo "entrypoint: an HBase process exited (status $status); stopping the other" >&2
kill -TERM "$thrift" "$master" 2>/dev/null
wait
exit $(( status == 0 ? 1 : status ))
