"""The reference lab's agent, built on the official ``openai`` SDK instead of ``complete``."""
