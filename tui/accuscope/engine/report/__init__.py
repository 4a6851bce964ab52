"""Reports to paste: a task's verdict, findings and charts as HTML (inline SVG) or Markdown."""
