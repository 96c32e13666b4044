gate --max-growth 1 base.folded nocount.folded
