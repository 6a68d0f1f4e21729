"""Remote rewards for omni-rl: VLM judges over an OpenAI-compatible API, and reward servers over HTTP."""
