top --bogus base.folded
