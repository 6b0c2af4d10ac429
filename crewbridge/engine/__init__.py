"""The loop and the engine (layer 6): one agent's tool loop, several agents, reviews, chats, what
programs read."""
