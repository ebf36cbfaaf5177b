"""Other stream processors, run as contenders by ``kafka-eos bench --suite contenders``."""
