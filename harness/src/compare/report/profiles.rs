//! The `--profile` section of report.html: per row, where the server's and
//! the generator's CPU went (the mean of its runs' breakdowns), a stacked
//! bar of the server's CPU per request, and a link to every run's flame
//! graphs.

use super::super::results::{Results, Row};
use super::charts::escape;
use crate::lab::profile::{Breakdown, Profile, ProgramShare};

/// The profiles of `row`'s runs that were taken.
fn taken(row: &Row) -> Vec<&Profile> {
    row.runs
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .filter(|p| p.error.is_none())
        .collect()
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The mean of a side's breakdowns.
fn mean_of(sides: &[&Breakdown]) -> Breakdown {
    Breakdown {
        cpu_ns: sides.iter().map(|b| b.cpu_ns).sum(),
        user_us_per_request: mean(sides.iter().map(|b| b.user_us_per_request)),
        kernel_us_per_request: mean(sides.iter().map(|b| b.kernel_us_per_request)),
        kernel_pct: mean(sides.iter().map(|b| b.kernel_pct)),
        kernel_tcp_pct: mean(sides.iter().map(|b| b.kernel_tcp_pct)),
        kernel_sched_pct: mean(sides.iter().map(|b| b.kernel_sched_pct)),
        coverage_pct: Some(mean(sides.iter().filter_map(|b| b.coverage_pct))),
        programs: mean_programs(sides),
        php_pct: sides
            .iter()
            .any(|b| b.php_pct.is_some())
            .then(|| mean(sides.iter().map(|b| b.php_pct.unwrap_or(0.0)))),
    }
}

/// Each program's mean share over the runs (0 in a run that lacks it),
/// biggest first.
fn mean_programs(sides: &[&Breakdown]) -> Vec<ProgramShare> {
    let mut sum: std::collections::BTreeMap<&str, f64> = Default::default();
    for b in sides {
        for p in &b.programs {
            *sum.entry(&p.program).or_default() += p.pct;
        }
    }
    let mut out: Vec<ProgramShare> = sum
        .into_iter()
        .map(|(program, pct)| ProgramShare {
            program: program.to_string(),
            pct: pct / sides.len().max(1) as f64,
        })
        .collect();
    out.sort_by(|a, b| b.pct.total_cmp(&a.pct));
    out
}

/// "nginx 40% · php-fpm8.2 60% (PHP itself 35%)": the server's programs
/// where there are several or one is PHP, else nothing.
fn programs_text(b: &Breakdown) -> String {
    if b.programs.len() < 2 && b.php_pct.is_none() {
        return String::new();
    }
    let mut text = b
        .programs
        .iter()
        .filter(|p| p.pct >= 0.5)
        .map(|p| format!("{} {:.0}%", p.program, p.pct))
        .collect::<Vec<_>>()
        .join(" · ");
    if let Some(php) = b.php_pct {
        text.push_str(&format!(" (PHP itself {php:.0}%)"));
    }
    text
}

/// The section, or nothing when no run was profiled.
pub fn html(results: &Results) -> String {
    let asked = results
        .rows
        .iter()
        .flat_map(|r| &r.runs)
        .any(|run| run.profile.is_some());
    if !asked {
        return String::new();
    }
    let mut out = String::from(
        "<h2>Where the CPU went (<code>--profile</code>)</h2>\n<p class=\"note\">perf record, \
         a software clock at 99 Hz with call graphs, during each measured run: the server's \
         process tree and the load generator. µs of CPU per request (the mean of the runs: the \
         meter's CPU, split by the profile; \"seen\": the share of the meter's CPU the profile \
         saw, perf starting and stopping around the run); the \
         kernel's share of the server's CPU, and the shares of it spent under a kernel TCP \
         function and under the scheduler; the server's programs' shares of its CPU, and for PHP \
         the share in PHP itself (its binary, extensions and JIT code: Debian's PHP is stripped, \
         so the Zend engine and php-fpm's own FastCGI code, one binary, are not told apart; libc \
         and the kernel are not PHP). \
         The bar: the server's user (blue) and kernel (orange) µs per request, to scale across rows.</p>\n",
    );
    let rows: Vec<(&Row, Breakdown, Breakdown, Vec<&Profile>)> = results
        .rows
        .iter()
        .map(|r| {
            let p = taken(r);
            let server = mean_of(&p.iter().map(|p| &p.server).collect::<Vec<_>>());
            let generator = mean_of(&p.iter().map(|p| &p.generator).collect::<Vec<_>>());
            (r, server, generator, p)
        })
        .collect();
    let widest = rows
        .iter()
        .map(|(_, s, ..)| s.user_us_per_request + s.kernel_us_per_request)
        .fold(1e-9, f64::max);
    out.push_str(
        "<div class=\"wide\"><table>\n<tr><th>server</th><th>workload</th><th>c</th>\
         <th>server µs/req user</th><th>kernel</th><th>kernel %</th><th>in TCP %</th>\
         <th>in the scheduler %</th><th>programs</th><th>seen %</th><th>generator µs/req</th><th>server CPU per request</th>\
         <th>flame graphs</th></tr>\n",
    );
    for (row, s, g, profiles) in &rows {
        let head = format!(
            "<td>{}</td><td>{}</td><td class=\"n\">{}</td>",
            escape(&row.server),
            escape(&row.workload),
            row.connections
        );
        if profiles.is_empty() {
            let why = row
                .runs
                .iter()
                .filter_map(|r| r.profile.as_ref()?.error.clone())
                .next()
                .unwrap_or_else(|| "not profiled".into());
            out.push_str(&format!(
                "<tr>{head}<td colspan=\"10\" class=\"error\">no profile: {}</td></tr>\n",
                escape(&why)
            ));
            continue;
        }
        let bar = |us: f64, color: &str| {
            format!(
                "<span style=\"display:inline-block;height:0.9em;width:{:.1}px;background:{color}\"></span>",
                200.0 * us / widest
            )
        };
        // "server 1 2 3 4 · generator 1 2 3 4": each run's flame graph.
        let links: Vec<String> = [("server", 0), ("generator", 1)]
            .into_iter()
            .filter_map(|(side, which)| {
                let runs: Vec<String> = profiles
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| {
                        let f = if which == 0 {
                            &p.server_svg
                        } else {
                            &p.generator_svg
                        };
                        f.as_ref()
                            .map(|f| format!("<a href=\"{}\">{}</a>", escape(f), i + 1))
                    })
                    .collect();
                (!runs.is_empty()).then(|| format!("{side} {}", runs.join(" ")))
            })
            .collect();
        out.push_str(&format!(
            "<tr>{head}<td class=\"n\">{:.1}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.0}</td>\
             <td class=\"n\">{:.0}</td><td class=\"n\">{:.0}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{:.1}</td><td style=\"white-space:nowrap\">{}{}</td><td style=\"white-space:nowrap\">{}</td></tr>\n",
            s.user_us_per_request,
            s.kernel_us_per_request,
            s.kernel_pct,
            s.kernel_tcp_pct,
            s.kernel_sched_pct,
            escape(&programs_text(s)),
            s.coverage_pct
                .filter(|c| *c > 0.0)
                .map_or("—".into(), |c| format!("{c:.0}")),
            g.user_us_per_request + g.kernel_us_per_request,
            bar(s.user_us_per_request, "#4878d0"),
            bar(s.kernel_us_per_request, "#ee854a"),
            links.join("<br>")
        ));
    }
    out.push_str("</table></div>\n");
    out
}
