"""The connections service's tables and the queries over them."""
