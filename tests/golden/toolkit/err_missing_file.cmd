top does-not-exist.pb.gz
