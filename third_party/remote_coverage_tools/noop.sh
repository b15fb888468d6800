#!/bin/sh
echo "coverage tools are not available offline; nothing merged" >&2
exit 0
