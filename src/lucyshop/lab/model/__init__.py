"""What a model is asked (``tasks``), and what answers it (``backend``): a real model, embedded or
Ollama, or the scripted stand-in (``scripted``) that exercises 5 and 6 are graded on."""
