"""Ferry's container image: a local Debian base and ``deploy/Dockerfile`` on top, both cached.

No image registry can be reached from the machines Ferry is built on, so the default base is
made locally: ``debootstrap --variant=minbase`` (Debian's packages) and ``docker import``, tagged
``ferry-base:bookworm`` and labelled ``io.ferry.base``. Users may pass any public Python image
as the base instead (``--base python:3.11-slim-bookworm``).

``deploy/Dockerfile`` builds from the repository's layout (``docker build -f deploy/Dockerfile .``
works from a checkout). The build context made here has that layout, holding only what the image
is built from: Ferry's sources, the lock files (``deploy/requirements.lock``,
``deploy/build-requirements.lock``) and, in ``deploy/wheels/``, the locked wheels (``pip
download`` with their hashes, cached per lock), so the image build itself needs no Python package
index. The image is labelled with a hash of everything that goes into it (Ferry's sources, the
Dockerfile, the lock files, the base image's id); a build whose hash is already on the engine
builds nothing.

The image holds what a worker and a controller need: Ferry's ``install_requires``, no extras
(:mod:`common.extras`). pyspark (the ``spark`` extra) serves ``ferry validate`` and ``ferry
audit`` and would add about 450 MB plus a Java runtime; the controller runs ``ferry validate``
only when ``controller.validation_interval_s`` > 0, and ``ferry fleet up`` refuses such a config.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.fleet.errors import FleetError, ImageMissing

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
BASE_TAG = "ferry-base:bookworm"
BASE_LABEL = "io.ferry.base"
BASE_SUITE = "bookworm"  # Debian 12: Python 3.11, as on the hosts that build the wheels
IMAGE_REPOSITORY = "ferry"
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:latest"
SOURCE_LABEL = "io.ferry.source"
SOURCE_FILES = ("setup.cfg", "pyproject.toml", "README.md")
LOCK_FILES = ("deploy/requirements.lock", "deploy/build-requirements.lock")


@dataclass
class BuildResult:
    tag: str
    built_base: bool
    built_image: bool
    seconds: float


def cache_dir() -> Path:
    return Path(os.environ.get("FERRY_DEV_DIR", REPO / ".dev")) / "fleet"


def _find_image(client: Any, ref: str) -> Any | None:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def require_image(client: Any, ref: str) -> Any:
    image = _find_image(client, ref)
    if image is None:
        raise ImageMissing(f"image {ref} is not on the engine; build it with `ferry fleet build`")
    return image


def ensure_base(client: Any, mirror: str | None = None) -> bool:
    """Builds ``ferry-base:bookworm`` unless it is on the engine; True when it was built."""
    existing = _find_image(client, BASE_TAG)
    if existing is not None and existing.labels.get(BASE_LABEL):
        return False
    if shutil.which("debootstrap") is None:
        raise FleetError("debootstrap is not installed: `apt-get install -y debootstrap`, or run `make setup` as root")
    mirror = mirror or os.environ.get("FERRY_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    work = cache_dir()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="base-", dir=work))
    try:
        rootfs, tarball = scratch / "rootfs", scratch / "rootfs.tar"
        _run(["debootstrap", "--variant=minbase", BASE_SUITE, str(rootfs), mirror], "debootstrap")
        _run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], "tar")
        repository, tag = BASE_TAG.split(":")
        client.api.import_image_from_file(
            str(tarball),
            repository=repository,
            tag=tag,
            changes=[f"LABEL {BASE_LABEL}=debian-{BASE_SUITE}-minbase", "ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'],
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if _find_image(client, BASE_TAG) is None:
        raise FleetError(f"docker import did not produce {BASE_TAG}")
    return True


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-15:])
        raise FleetError(f"{what} failed with exit status {result.returncode}:\n{tail}")


def _source_paths() -> list[Path]:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    packages = [p.strip() for p in parser["options.packages.find"]["include"].split() if not p.strip().endswith(".*")]
    paths = [REPO / name for name in SOURCE_FILES]
    for package in packages:
        # ferry/<package> are symbolic links to the top-level folders: walk through them (rglob
        # does not), so the copied tree holds real files under ferry/.
        for folder, dirs, files in os.walk(REPO / package, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            paths += [Path(folder) / f for f in sorted(files)]
    return paths


def _digest(parts: list[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _wheelhouse(locks: list[Path]) -> Path:
    """The wheels the lock files name (each checked against its hash), downloaded once per set of
    locks, for this host's Python (the image's minor version, 3.11)."""
    key = _digest([sys.version.encode(), *(lock.read_bytes() for lock in locks)])[:16]
    house = cache_dir() / f"wheels-{key}"
    if (house / ".done").exists():
        return house
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir(parents=True)
    for lock in locks:
        _run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check"),
                *("--require-hashes", "--only-binary=:all:", "-d", str(house), "-r", str(lock)),
            ],
            f"pip download (the image's locked packages, {lock.name})",
        )
    (house / ".done").touch()
    return house


def build(client: Any, base: str | None = None, dockerfile: Path = DOCKERFILE) -> BuildResult:
    """Builds Ferry's image unless an image of the same sources is on the engine.

    ``base`` None: the local Debian base (built first when missing) and an offline pip install
    from the locked wheels downloaded on this host (same Python minor version). Any other base: pip may also
    use the package index for wheels the host's Python cannot provide.
    """
    from docker.errors import APIError, BuildError

    started = time.monotonic()
    built_base = False
    if base is None:
        built_base = ensure_base(client)
        base, offline = BASE_TAG, "1"
    else:
        offline = "0"
    base_image = _find_image(client, base)
    locks = [REPO / name for name in LOCK_FILES]
    sources = _source_paths()
    source_hash = _digest(
        [
            dockerfile.read_bytes(),
            base.encode(),
            (base_image.id if base_image else "").encode(),
            offline.encode(),
            *(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() for p in [*locks, *sources]),
        ]
    )[:16]
    tag = f"{IMAGE_REPOSITORY}:src-{source_hash}"
    existing = client.images.list(filters={"label": f"{SOURCE_LABEL}={source_hash}"})
    if existing:
        existing[0].tag(IMAGE_REPOSITORY, "latest")
        return BuildResult(tag, built_base, False, time.monotonic() - started)

    house = _wheelhouse(locks)
    work = cache_dir()
    work.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix="context-", dir=work))
    try:
        # The repository's layout, as `docker build -f deploy/Dockerfile .` sees it from a checkout.
        for path in [*locks, *sources]:
            target = context / path.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        shutil.copy(dockerfile, context / "deploy" / "Dockerfile")
        shutil.copytree(house, context / "deploy" / "wheels", ignore=shutil.ignore_patterns(".done"))
        try:
            client.images.build(
                path=str(context),
                dockerfile="deploy/Dockerfile",
                tag=tag,
                rm=True,
                forcerm=True,
                network_mode="host",
                buildargs={"BASE": base, "PIP_OFFLINE": offline},
                labels={SOURCE_LABEL: source_hash, "io.ferry.image": "ferry"},
            )
        except BuildError as exc:
            lines = [str(chunk.get("stream", chunk.get("error", ""))).rstrip() for chunk in exc.build_log]
            tail = "\n".join(line for line in lines if line)[-3000:]
            raise FleetError(f"the image build failed: {exc.msg}\n{tail}") from None
        except APIError as exc:
            raise FleetError(f"the image build failed: {exc.explanation or exc}") from None
    finally:
        shutil.rmtree(context, ignore_errors=True)
    new = client.images.get(tag)
    new.tag(IMAGE_REPOSITORY, "latest")
    _prune(client, keep=new.id)
    return BuildResult(tag, built_base, True, time.monotonic() - started)


def _prune(client: Any, keep: str) -> None:
    """Removes Ferry's older images (by label), except those a container still uses."""
    from docker.errors import APIError

    for old in client.images.list(filters={"label": "io.ferry.image=ferry"}):
        if old.id != keep:
            # A container of some fleet may still run it: then it goes with a later build.
            with contextlib.suppress(APIError):
                client.images.remove(old.id, force=False)
