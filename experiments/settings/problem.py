"""The ``problem`` block: one class per problem kind (conf/problem/*.yaml), told apart by ``kind``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from experiments.settings.fields import (
    VISION_CLASSES,
    Frozen,
    Name,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    file_problem,
    not_blank,
)
from problems.logreg import MAX_INIT_STD

NAMED = {
    "name": "be a name (the summary's problem column; leave problem.name out for the option's own)",
    "dataset": f"name a data set ({', '.join(VISION_CLASSES)}) or be a mapping with _target_",
    "model": "name a built-in net (lenet5, allcnn, resnet18) or be a mapping with _target_",
}
"""What each of the problem's free-text keys must be: an empty or blank one names nothing."""


class ProblemBase(Frozen):
    """Keys every problem has (conf/problem/*.yaml)."""

    name: Name
    batch_size: PositiveInt
    target_loss: NonNegativeFloat | None  # every loss here is >= 0: a negative target is never reached
    hparams: dict[str, dict[str, Any]] = Field(strict=False)
    """The algorithms' defaults on this problem, read by the algorithm yaml files through interpolation."""
    max_train: PositiveInt | None = None
    max_test: PositiveInt | None = None
    init_std: Annotated[float, Field(ge=0, le=MAX_INIT_STD)] | None = None
    """Standard deviation of the initial iterate's entries (``+problem.init_std=``; absent: the problem's own); at
    most :data:`problems.logreg.MAX_INIT_STD`."""
    eval_batch_size: PositiveInt | None = None
    """Examples per forward pass when evaluating (``+problem.eval_batch_size=``; absent: the problem's own)."""

    @field_validator(*NAMED, check_fields=False)  # dataset, model: the kinds that have them
    @classmethod
    def _named(cls, v, info: ValidationInfo):
        return not_blank(f"problem.{info.field_name}", v, NAMED[info.field_name])

    @property
    def spec(self) -> dict:
        """The block as a plain dict, for :func:`problems.build_problem` (keys left unset are absent)."""
        return self.model_dump(exclude_none=False)


class LogregVision(ProblemBase):
    """Binary logistic regression on two classes of an image data set."""

    kind: Literal["logreg"]
    dataset: str | Annotated[dict[str, Any], Field(strict=False)]
    """A built-in image set (fashion_mnist, mnist, cifar10) or a mapping with ``_target_`` (problems/__init__.py)."""
    classes: tuple[NonNegativeInt, NonNegativeInt] = Field(strict=False)
    row_norm: Literal["unit"] | None
    l2: NonNegativeFloat

    @model_validator(mode="after")
    def _two_classes(self) -> LogregVision:
        n = VISION_CLASSES.get(self.dataset, 10) if isinstance(self.dataset, str) else 10**9
        a, b = self.classes
        if a == b or a >= n or b >= n:
            raise ValueError(f"problem.classes={list(self.classes)}: must be two different class indices in 0..{n - 1}")
        return self


class LogregLibsvm(ProblemBase):
    """Binary logistic regression on a LIBSVM file (sparse)."""

    kind: Literal["logreg_libsvm"]
    path: str | None
    test_path: str | None
    n_features: PositiveInt | None
    zero_based: Literal["auto"] | bool
    l2: NonNegativeFloat

    @model_validator(mode="after")
    def _files(self) -> LogregLibsvm:
        if self.path is None:
            raise ValueError("problem.path=null: required for problem=logreg_libsvm (a LIBSVM file)")
        for key in ("path", "test_path"):
            value = getattr(self, key)
            why = None if value is None else file_problem(value)
            if why is not None:
                raise ValueError(f"problem.{key}={value}: {why}")
        return self


class LogregRcv1like(ProblemBase):
    """Logistic regression on a synthetic, seeded set with rcv1.binary's shape (problems/rcv1like.py)."""

    kind: Literal["logreg_rcv1like"]
    seed: NonNegativeInt
    n_train: PositiveInt
    n_test: PositiveInt
    n_features: PositiveInt
    nnz_per_row: PositiveFloat
    informative: PositiveInt | None = None
    """Features that carry planted weight (the most frequent ones); None: min(5000, n_features)."""
    l2: NonNegativeFloat


class Cnn(ProblemBase):
    """A convolutional net on an image data set (problems/cnn.py)."""

    kind: Literal["cnn"]
    model: str | Annotated[dict[str, Any], Field(strict=False)]
    """A built-in net (lenet5, allcnn, resnet18) or a mapping with ``_target_``: your own module's net."""
    dataset: str | Annotated[dict[str, Any], Field(strict=False)]
    standardize: bool


class CnnTiming(ProblemBase):
    """A net at its true size and gradient cost without its data: time per epoch only (problems/timing.py)."""

    kind: Literal["cnn_timing"]
    model: str | Annotated[dict[str, Any], Field(strict=False)]
    image_shape: tuple[PositiveInt, PositiveInt, PositiveInt] = Field(strict=False)
    classes: PositiveInt
    num_train: PositiveInt
    pool: PositiveInt
    seed: NonNegativeInt

    @field_validator("target_loss")
    @classmethod
    def _no_target(cls, v):
        if v is not None:
            raise ValueError(f"problem.target_loss={v}: a timing-only problem has no loss to reach (null)")
        return v


Problem = Annotated[LogregVision | LogregLibsvm | LogregRcv1like | Cnn | CnnTiming, Field(discriminator="kind")]
