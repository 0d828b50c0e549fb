"""The small decoder the language-model tests describe: embeddings, a ModuleList of
blocks (what FSDP wraps, and what checkpointing recomputes), a head over the
vocabulary."""
import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint

VOCAB, WIDTH, LAYERS = 1000, 128, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.down = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Decoder(nn.Module):
    def __init__(self, checkpointing=None):
        """checkpointing: None, "reentrant" or "non_reentrant" (torch.utils.checkpoint
        around each block)."""
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB)
        self.checkpointing = checkpointing

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            if self.checkpointing:
                x = checkpoint.checkpoint(block, x,
                                          use_reentrant=self.checkpointing == "reentrant")
            else:
                x = block(x)
        return self.head(x)
