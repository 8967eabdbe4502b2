"""The real implementation: RocksMQ on RocksDB through rocksdict."""
