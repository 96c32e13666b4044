top nocount.folded
