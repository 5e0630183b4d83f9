#!/bin/sh
# Uploaded into the sandbox by examples/ci-pipeline.yaml and run there.
set -eu
{
  echo "python: $(python3 --version 2>&1)"
  echo "git: $(git --version)"
  echo "files: $(ls -1 | wc -l)"
} > checks.txt
