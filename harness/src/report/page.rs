//! The pieces every command's report files share: a Markdown table, a
//! plain HTML table, a self-contained HTML page, and writing the files of
//! a results directory.

use std::path::Path;

use anyhow::Context;

use super::svg::escape;

/// A Markdown table; the first row is the header.
pub fn md_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        out.push_str("| ");
        out.push_str(
            &r.iter()
                .map(|c| c.replace('|', "\\|"))
                .collect::<Vec<_>>()
                .join(" | "),
        );
        out.push_str(" |\n");
        if i == 0 {
            out.push('|');
            out.push_str(&"---|".repeat(r.len()));
            out.push('\n');
        }
    }
    out
}

/// An HTML table in a box that scrolls when it is wider than the page; the
/// first row is the header.
pub fn html_table(rows: &[Vec<String>]) -> String {
    let mut o = String::from("<div class=\"wide\"><table>\n");
    for (i, r) in rows.iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        o.push_str("<tr>");
        for c in r {
            o.push_str(&format!("<{tag}>{}</{tag}>", escape(c)));
        }
        o.push_str("</tr>\n");
    }
    o + "</table></div>\n"
}

/// A self-contained page (inline CSS, nothing fetched) around `body`.
pub fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\
         body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}\
         table {{ border-collapse: collapse; font-size: 0.9em; }} th, td {{ border: 1px solid #ccc; padding: 3px 8px; }}\
         .wide {{ overflow-x: auto; }} .note {{ color: #555; white-space: pre-wrap; }}\
         .evidence {{ margin: 0.3em 0 0.6em 1.5em; padding-left: 0.6em; border-left: 3px solid #ee854a; color: #444; }}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// Writes `files` (name, text) into `dir`, created if needed.
pub fn write_files(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}
