"""Generates the Python stubs for mesh.v1 from proto/ into a directory.

    python gen_stubs.py OUT_DIR

Then put OUT_DIR on PYTHONPATH (teammate.py does it when given --stubs).
"""
import pathlib
import sys

from grpc_tools import protoc


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "gen")
    out.mkdir(parents=True, exist_ok=True)
    proto_root = pathlib.Path(__file__).resolve().parents[2] / "proto"
    code = protoc.main([
        "grpc_tools.protoc",
        f"-I{proto_root}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        str(proto_root / "mesh" / "v1" / "mesh.proto"),
    ])
    if code != 0:
        print(f"protoc failed with {code}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
