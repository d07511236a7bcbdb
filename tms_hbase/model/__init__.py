"""Values and byte layouts: topics, rows, message ids, the wire formats, validation, the library's counters. No
I/O.
"""
