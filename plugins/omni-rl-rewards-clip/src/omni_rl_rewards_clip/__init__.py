"""Model-based rewards for omni-rl on transformers CLIP models: pickscore, clip_score, hpsv2, aesthetic."""
