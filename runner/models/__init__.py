"""Models: the protocol the engine calls, the OpenAI-compatible chat
completions client, and the turn loop that runs tool calls in the sandbox."""
