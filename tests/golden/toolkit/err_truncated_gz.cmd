top truncated.gz
