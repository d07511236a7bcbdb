"""CDAP's messaging REST API as both of its ends speak it: ``codec`` (paths, media types, the body codecs and
the table between TmsError classes and HTTP status codes) and ``shared`` (the bodies of shared subscriptions).
The gateway (``gateway/``) and its clients (:mod:`tms_hbase.gateway_client`) both import it, so the two ends
cannot drift apart; it imports only the values of :mod:`tms_hbase.model`.
"""
