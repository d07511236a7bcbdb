"""What an installation holds besides messages: topic metadata, the tail-cache setting, and HBase's clock."""
