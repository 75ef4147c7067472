"""An MCP server (stdio, the official Python SDK, mcp 2.3.0) that probes
the sandbox it runs in, for crates/agentwire/tests/e2e/sandboxes.rs.

Tools:
  connect PORT       opens a TCP connection to 127.0.0.1:PORT; answers
                     "connected" or "refused: <the OS error>"
  write PATH TEXT    writes TEXT to PATH; answers "written" or
                     "failed: <the OS error>"
  read PATH          the text at PATH, or "failed: <the OS error>"
"""

import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("sandbox-probe")


@server.tool()
def connect(port: int) -> str:
    """Tries a TCP connection to 127.0.0.1:PORT."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return "connected"
    except OSError as error:
        return f"refused: {error.strerror or error}"


@server.tool()
def write(path: str, text: str) -> str:
    """Writes TEXT to PATH."""
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return "written"
    except OSError as error:
        return f"failed: {error.strerror or error}"


@server.tool()
def read(path: str) -> str:
    """Reads the text at PATH."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        return f"failed: {error.strerror or error}"


if __name__ == "__main__":
    server.run("stdio")
