"""What answers a model turn: a real model (embedded or Ollama) or the scripted stand-in."""
