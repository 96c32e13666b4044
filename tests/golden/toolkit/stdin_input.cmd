top - < base.folded
