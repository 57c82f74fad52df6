"""The code that runs inside the sandbox, beside the student's module: nothing here is
trusted by the side that judges. ``worker`` loads the staged file and answers calls over the
wire; whatever it sends back is checked on arrival (``remote``, ``wire``)."""
