"""Drives `oomlint server` with pygls's language client (PyPI), as an editor would:
initialize, open a training script with a bug, receive the diagnostic, ask for the
code actions, apply "Add `# noqa: OOM201`", change the document, receive an empty
list; then the same through a notebook's cells. Usage: lsp_client.py OOMLINT_BINARY
"""

import asyncio
import sys
import tempfile
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

SCRIPT = """\
import torch


def train(model, loader, criterion, optimizer):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
"""

CELL = "losses = []\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    losses.append(loss)\n"


def apply(text, edits):
    """Applies LSP text edits (the texts here are ASCII: UTF-16 units are bytes)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(p):
        return starts[min(p.line, len(starts) - 1)] + p.character

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


class Published:
    """The diagnostics the server published, per document and version."""

    def __init__(self):
        self.seen = []
        self.changed = asyncio.Event()

    def add(self, params):
        self.seen.append(params)
        self.changed.set()

    async def wait(self, uri, version=None, timeout=20):
        async def found():
            while True:
                for p in self.seen:
                    if p.uri == uri and (version is None or p.version == version):
                        self.seen.remove(p)
                        return p.diagnostics
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(found(), timeout)


async def noqa_edits(client, uri, diagnostic):
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=t.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    titles = [a.title for a in actions]
    print(f"  code actions: {titles}")
    action = next(a for a in actions if a.title == "Add `# noqa: OOM201`")
    return action.edit.changes[uri]


async def main(binary):
    work = Path(tempfile.mkdtemp())
    client = LanguageClient("oomlint-ci", "1.0")
    published = Published()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params):
        published.add(params)

    await client.start_io(binary, "server", cwd=str(work))
    result = await client.initialize_async(
        t.InitializeParams(
            capabilities=t.ClientCapabilities(
                notebook_document=t.NotebookDocumentClientCapabilities(
                    synchronization=t.NotebookDocumentSyncClientCapabilities()
                )
            ),
            root_uri=work.as_uri(),
        )
    )
    print(f"server capabilities: code actions {result.capabilities.code_action_provider}")
    client.initialized(t.InitializedParams())

    uri = (work / "train.py").as_uri()
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=SCRIPT)
        )
    )
    diags = await published.wait(uri, 1)
    print(f"train.py v1: {[(d.code, d.range.start.line + 1) for d in diags]}")
    assert [d.code for d in diags] == ["OOM201"], diags
    assert diags[0].code_description.href.endswith("/rules/undetached_loss_append.rs")
    fixed = apply(SCRIPT, await noqa_edits(client, uri, diags[0]))
    assert "losses.append(loss)  # noqa: OOM201\n" in fixed, fixed
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    diags = await published.wait(uri, 2)
    print(f"train.py v2: {len(diags)} diagnostics")
    assert len(diags) == 0, diags

    nb = (work / "explore.ipynb").as_uri()
    cell = f"vscode-notebook-cell:{work / 'explore.ipynb'}#W0"
    client.notebook_document_did_open(
        t.DidOpenNotebookDocumentParams(
            notebook_document=t.NotebookDocument(
                uri=nb,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[t.NotebookCell(kind=t.NotebookCellKind.Code, document=cell)],
            ),
            cell_text_documents=[
                t.TextDocumentItem(uri=cell, language_id="python", version=1, text=CELL)
            ],
        )
    )
    diags = await published.wait(cell, 1)
    print(f"notebook cell v1: {[(d.code, d.range.start.line + 1) for d in diags]}")
    assert [(d.code, d.range.start.line) for d in diags] == [("OOM201", 4)], diags
    edits = await noqa_edits(client, cell, diags[0])
    client.notebook_document_did_change(
        t.DidChangeNotebookDocumentParams(
            notebook_document=t.VersionedNotebookDocumentIdentifier(uri=nb, version=2),
            change=t.NotebookDocumentChangeEvent(
                cells=t.NotebookDocumentCellChanges(
                    text_content=[
                        t.NotebookDocumentCellContentChanges(
                            document=t.VersionedTextDocumentIdentifier(uri=cell, version=2),
                            changes=[
                                t.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
                                for e in edits
                            ],
                        )
                    ]
                )
            ),
        )
    )
    diags = await published.wait(cell, 2)
    print(f"notebook cell v2: {len(diags)} diagnostics")
    assert len(diags) == 0, diags

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print("pygls client: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
