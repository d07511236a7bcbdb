#!/usr/bin/env bash
# Healthy = the Thrift1 gateway answers getTableNames with a table list, which takes a live master and
# region server behind it (a gateway whose HBase is down answers with an IOError instead). One call in
# Thrift's binary protocol over buffered transport, written out byte by byte so the image needs no client.
# Usage: healthcheck.sh [HOST [PORT]]   (default 127.0.0.1 9090)
set -euo pipefail
exec 3<>"/dev/tcp/${1:-127.0.0.1}/${2:-9090}"
# version 1 + CALL, name length 13, "getTableNames", sequence id 0, empty argument struct (STOP)
printf '\x80\x01\x00\x01\x00\x00\x00\x0dgetTableNames\x00\x00\x00\x00\x00' >&3
# The reply: version 1 + REPLY (80 01 00 02), the name and sequence id again (21 bytes), then the first
# field's type: 0f (list) is the success field 0; 0c (struct) would be the IOError field 1.
reply="$(timeout 8 head -c 26 <&3 | od -An -tx1 | tr -d ' \n')"
[[ "$reply" == 80010002* && "$reply" == *0f ]]
