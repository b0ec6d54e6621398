"""BERTScore F1 computed by the `bert-score` package's scoring function on a model loaded and checked here.

Greedy matching of contextual token embeddings from one layer of the model: each candidate token's
best cosine match among reference tokens gives precision, the converse gives recall, F1 their harmonic
mean. [CLS]/[SEP] are excluded (bert-score gives them zero weight), no idf weighting, no baseline
rescaling. The project default is the embedded all-MiniLM-L6-v2 at its last (6th) layer, because it
ships offline; the published study used roberta-large at bert-score's default layer (17), which is one
config line away: bertscore_model='roberta-large', bertscore_layers=None (needs those weights locally).

The model is loaded here, checked whole (`weights.load_checked`: its class is the one its config names), and handed
to bert-score's own scoring function (`bert_cos_score_idf`, with the weights BERTScorer uses when idf is off).
BERTScorer itself is not used: it picks the model class from the model's name (any name containing "t5" loads
`T5EncoderModel`, one starting with "scibert" another path), so a directory whose path held such a word was scored
by random weights. bert-score reads the model's last hidden state; here that is the state after the configured
layer (`_LayerOutput`), which is what bert-score gets by dropping the layers above it. tests/metrics checks the
numbers against a direct computation of the definition from the model's hidden states.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

from narrative_eval.metrics.base import Metric, cached_model, metric
from narrative_eval.quiet import no_weight_loading_bar
from narrative_eval.records import MetricsSpec
from narrative_eval.weights import load_checked, resolve_weights

DEFAULT_MODEL = "embedded:all-minilm-l6-v2"
"""BERTScore model when none is configured."""
DEFAULT_LAYERS = 6
"""Layer of the default model whose embeddings are matched (its last)."""
DEFAULT_BATCH_SIZE = 64
"""Sentences per forward pass."""
WHAT = "BERTScore model"
"""How errors name the model."""


class _LayerOutput:
    """The model as bert-score calls it, giving the hidden state after `layer` layers as its first output (bert-score
    would drop the layers above `layer` and read the last state: the same numbers)."""

    def __init__(self, model: Any, layer: int) -> None:
        self.model = model
        self.layer = layer

    def eval(self) -> _LayerOutput:
        self.model.eval()
        return self

    def parameters(self) -> Any:
        return self.model.parameters()

    def __call__(self, input_ids: Any, attention_mask: Any = None, output_hidden_states: bool = False) -> tuple[Any]:
        hidden = self.model(input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        return (hidden[self.layer],)


def default_layer(model: str) -> int:
    """bert-score's tuned layer for a model it knows by name ('roberta-large' -> 17)."""
    from bert_score.utils import model2layers

    name = PurePosixPath(model).name
    if name not in model2layers:
        raise ValueError(f"bert-score has no default layer for {model!r}; set MetricsSpec.bertscore_layers")
    return int(model2layers[name])


def _encoder(model_path: str, layer: int) -> tuple[_LayerOutput, Any]:
    """(the checked model seen at `layer`, its tokenizer), loaded once per process."""

    def load():
        from transformers import AutoModel, AutoTokenizer

        with no_weight_loading_bar():
            model = load_checked(AutoModel, model_path, what=WHAT)
            # The tokenizer bert-score's own loader gives (its default use_fast=False), so the tokens are the same.
            tokenizer = AutoTokenizer.from_pretrained(model_path, use_fast=False)
        model.eval()
        if hasattr(model, "encoder") and hasattr(model, "decoder"):  # an encoder-decoder: bert-score reads its encoder
            model = model.encoder
        layers = int(getattr(model.config, "num_hidden_layers", getattr(model.config, "num_layers", layer)))
        if not 0 <= layer <= layers:
            raise ValueError(f"{WHAT} {model_path}: layer {layer} asked for, but it has {layers} layers")
        return _LayerOutput(model, layer), tokenizer

    return cached_model(("bertscore", model_path, layer), load)


@metric("bertscore", in_at_avg=True, label="BERTScore")
class BertScore(Metric):
    """BERTScore F1 of each candidate against its reference."""

    def __init__(
        self, model: str = DEFAULT_MODEL, num_layers: int | None = DEFAULT_LAYERS, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        self.model_path = resolve_weights(model)
        """Local model directory (or hub id, which must already be cached: loading is offline)."""
        self.num_layers = default_layer(model) if num_layers is None else num_layers
        """Layer whose embeddings are matched (bert-score's tuned layer for a model it knows when not configured)."""
        self.batch_size = batch_size
        """Sentences per forward pass."""

    @classmethod
    def from_spec(cls, spec: MetricsSpec) -> BertScore:
        return cls(model=spec.bertscore_model, num_layers=spec.bertscore_layers)

    def load(self) -> None:
        _encoder(self.model_path, self.num_layers)

    def _score_nonblank(self, candidates: list[str], references: list[str]) -> list[float]:
        from bert_score.utils import bert_cos_score_idf

        model, tokenizer = _encoder(self.model_path, self.num_layers)
        # No idf: every token weighs 1 but the special tokens, as BERTScorer(idf=False) weighs them.
        weights: defaultdict[int, float] = defaultdict(lambda: 1.0)
        weights[tokenizer.sep_token_id] = 0
        weights[tokenizer.cls_token_id] = 0
        scores = bert_cos_score_idf(model, references, candidates, tokenizer, weights, verbose=False,
                                    batch_size=self.batch_size, device="cpu", all_layers=False).cpu()
        return [float(value) for value in scores[..., 2].tolist()]  # (precision, recall, F1) per pair
