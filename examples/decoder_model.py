"""The decoder used by the example, the benchmark and the end-to-end tests.

A Hugging Face `transformers` LlamaForCausalLM with seeded random weights (no hub download)
and a static KV cache registered as mutable buffers (`key_cache_{i}`, `value_cache_{i}`, plus
the recipe's `cumulative_length_{i}` step counters), exportable with torch.export as
`forward(input_ids[1, T] int64, cache_position[T] int64) -> logits[1, T, vocab] float32`.
"""

import torch

#: The default decoder's LlamaConfig dimensions: vocab 512, hidden 64, 2 layers, 4 query heads,
#: 2 KV heads (grouped-query attention), head_dim 16.
DEFAULT_DIMS = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def build_model(max_seq_len: int, **config_overrides):
    """A seeded random LlamaForCausalLM (float32) configured for a static cache.

    Defaults: `DEFAULT_DIMS`, untied embeddings, rms_norm_eps 1e-5; `config_overrides` replace
    any LlamaConfig field."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    fields = dict(
        **DEFAULT_DIMS,
        max_position_embeddings=max_seq_len,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    fields.update(config_overrides)
    config = LlamaConfig(**fields)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    return model


def exportable_decoder(model, max_seq_len: int, clear_cache_each_call: bool = False):
    """`model` wrapped with transformers' static-cache export recipe, with forward fixed to
    `(input_ids, cache_position) -> logits`.

    The recipe registers each layer's cache as a buffer (`key_cache_{i}`, `value_cache_{i}`,
    `cumulative_length_{i}`), but its StaticCache keeps its own references to those tensors,
    which non-strict torch.export then lifts as *constants* (and run_decompositions rejects the
    duplicate inputs). Re-pointing the cache layers at the module's buffers at the top of
    forward makes every cache read and write go through the buffers, so export records
    them as mutable buffers (BUFFER_MUTATION). `clear_cache_each_call` zeroes the KV caches
    first (the negative test's non-persistent program).
    """
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    class StaticCacheDecoder(TorchExportableModuleWithStaticCache):
        def forward(self, input_ids, cache_position):
            for i, layer in enumerate(self.static_cache.layers):
                layer.keys = getattr(self, f"key_cache_{i}")
                layer.values = getattr(self, f"value_cache_{i}")
                layer.cumulative_length = getattr(self, f"cumulative_length_{i}")
                if clear_cache_each_call:
                    layer.keys.zero_()
                    layer.values.zero_()
            return super().forward(input_ids=input_ids, cache_position=cache_position)

    return StaticCacheDecoder(model, batch_size=1, max_cache_len=max_seq_len).eval()


def cache_buffers(module: torch.nn.Module) -> dict:
    """The KV cache buffers by FQN, in a stable order."""
    return {
        name: buf
        for name, buf in sorted(module.named_buffers())
        if "key_cache" in name or "value_cache" in name
    }


def cache_checksum(t: torch.Tensor) -> list:
    """[sum(x), sum(x * w), sum(|x|), sum(|x| * w)] in float64 with w = 1 + (flat index mod
    1021). The second term is position-sensitive (a row written at the wrong index changes
    it); the last two are the scales a comparison's tolerance is relative to."""
    flat = t.detach().reshape(-1).to(torch.float64)
    w = 1.0 + (torch.arange(flat.numel(), dtype=torch.float64) % 1021)
    return [
        float(flat.sum()),
        float((flat * w).sum()),
        float(flat.abs().sum()),
        float((flat.abs() * w).sum()),
    ]
