"""The terminal's face (layer 7): the early start, what a person sees, a run's log, chat, doctor,
crew init."""
