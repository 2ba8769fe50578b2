//! SVG charts drawn with `plotters` (SVG backend only: text stays `<text>`,
//! rendered by the browser): the page size, the drawing area, the
//! caption and axes layout every report's charts share.

use plotters::coord::Shift;
use plotters::prelude::*;

/// Text for HTML and SVG (XML) alike.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub const W: u32 = 860;
pub const H: u32 = 380;

pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

pub fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> DrawResult) -> String {
    let mut out = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut out, (W, H)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| e.to_string().into())
            .and_then(|()| draw(&root))
            .and_then(|()| root.present().map_err(|e| e.to_string().into()))
    };
    match res {
        Ok(()) => out,
        Err(e) => format!(
            "<p class=\"error\">chart failed: {}</p>",
            escape(&e.to_string())
        ),
    }
}

/// A chart on `root` in the report's layout: the caption, room for both
/// axes' labels.
pub fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: String,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80);
    b
}
