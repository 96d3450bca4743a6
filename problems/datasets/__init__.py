"""Dataset staging and loading helpers behind `problems.data`.

One module per on-disk format: `idx` (MNIST and Fashion-MNIST, torchvision's layout), `cifar` (CIFAR-10's pickled
batches), `libsvm` (sparse LIBSVM text files, via scikit-learn), plus `files` (the `DataError` type and atomic
writes) and `apt` (Debian's dataset packages). Use them through `problems.data`.
"""
