top --sample-index cpu base.folded
