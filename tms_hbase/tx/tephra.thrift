/*
 * Apache Tephra's transaction service interface (tephra-core/src/main/thrift/transaction.thrift, last release),
 * written out again for tms-hbase. Everything here is on the wire: field ids, types, enum values, method names and
 * exception ids must stay exactly as Tephra has them, so Java clients and servers interoperate with ours.
 * Namespaces do not travel on the wire.
 */

namespace java org.apache.tephra.distributed.thrift
namespace py tms_hbase.tx.tephra

enum TTransactionType {
  SHORT = 1,
  LONG = 2
}

enum TVisibilityLevel {
  SNAPSHOT = 1,
  SNAPSHOT_EXCLUDE_CURRENT = 2,
  SNAPSHOT_ALL = 3
}

/* Serialized with the binary protocol and no prefix, this is also Tephra's TransactionCodec format. */
struct TTransaction {
  1: i64 transactionId,
  2: i64 readPointer,
  3: list<i64> invalids,
  4: list<i64> inProgress,
  5: i64 firstShort,
  6: TTransactionType type,
  7: i64 writePointer,
  8: list<i64> checkpointWritePointers,
  9: TVisibilityLevel visibilityLevel
}

exception TTransactionNotInProgressException {
  1: string message
}

exception TTransactionCouldNotTakeSnapshotException {
  1: string message
}

exception TInvalidTruncateTimeException {
  1: string message
}

exception TTransactionConflictException {
  1: i64 transactionId,
  2: string conflictingKey,
  3: string conflictingClient
}

/* originalExceptionClass names the Java exception (e.g. java.lang.IllegalArgumentException) the client rethrows. */
exception TGenericException {
  1: string message,
  2: string originalExceptionClass
}

/* Workaround for THRIFT-1474 (a bare bool result cannot be told apart from a missing one). */
struct TBoolean {
  1: bool value
}

service TTransactionServer {
  TTransaction startLong(),
  TTransaction startShort(),
  TTransaction startLongClientId(1: string clientId) throws (1: TGenericException e),
  /* Deprecated: replaced by startShortWithTimeout. */
  TTransaction startShortTimeout(1: i32 timeout),
  TTransaction startShortClientId(1: string clientId) throws (1: TGenericException e),
  TTransaction startShortWithClientIdAndTimeOut(1: string clientId, 2: i32 timeout) throws (1: TGenericException e),
  TTransaction startShortWithTimeout(1: i32 timeout) throws (1: TGenericException e),
  /* Deprecated: replaced by canCommitOrThrow. */
  TBoolean canCommitTx(1: TTransaction tx, 2: set<binary> changes) throws (1: TTransactionNotInProgressException e),
  void canCommitOrThrow(1: i64 tx, 2: set<binary> changes) throws (1: TTransactionNotInProgressException e,
                                                                   2: TTransactionConflictException c,
                                                                   3: TGenericException g),
  /* Deprecated: replaced by commitOrThrow. */
  TBoolean commitTx(1: TTransaction tx) throws (1: TTransactionNotInProgressException e),
  void commitOrThrow(1: i64 tx, 2: i64 wp) throws (1: TTransactionNotInProgressException e,
                                                   2: TTransactionConflictException c,
                                                   3: TGenericException g),
  void abortTx(1: TTransaction tx),
  bool invalidateTx(1: i64 tx),
  binary getSnapshot() throws (1: TTransactionCouldNotTakeSnapshotException e),
  void resetState(),
  string status(),
  TBoolean truncateInvalidTx(1: set<i64> txns),
  TBoolean truncateInvalidTxBefore(1: i64 time) throws (1: TInvalidTruncateTimeException e),
  i32 invalidTxSize(),
  TTransaction checkpoint(1: TTransaction tx) throws (1: TTransactionNotInProgressException e),
  void pruneNow()
}
