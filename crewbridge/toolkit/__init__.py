"""Tools (layer 2): what a tool is, how a call is found in text, what the model is told of them,
hooks, the native channel."""
