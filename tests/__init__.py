"""The test suite. Every process it starts checks the no-wait locks of protocol code
(tms_hbase.runtime.green.no_wait_lock): a wait on an event loop while holding one raises."""

import os

os.environ["TMS_HBASE_CHECK_LOCKS"] = "1"
