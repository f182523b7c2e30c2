#if os(Linux)
import CacheSemantics
import Foundation

/// The status page: one HTML document with no outside assets. Everything is drawn on the
/// server (figures, tables, SVG charts), so it reads without JavaScript; its script fetches
/// the JSON every 2 s and redraws the same elements (`data-k` names a figure's place in
/// ``ProxyStatus``, `data-f` its format, `data-series` a chart's series).
package enum StatusPage {
    /// Seconds per chart point: 360 points for the hour.
    static let step = 10

    /// How a figure is written.
    package enum Format: String {
        case int, rate, pct, bytes, byteRate, micros, seconds, duration, time, text
    }

    /// A chart: its series are fields of ``ProxyStatus/History``.
    struct Chart {
        var title: String
        /// `rate`: per-second counts, averaged over a step; `latency`: microseconds, the
        /// highest second of a step.
        var latency: Bool
        var format: Format
        var series: [(field: String, label: String, color: String)]
    }

    static let charts: [Chart] = [
        Chart(
            title: "Requests per second", latency: false, format: .rate,
            series: [("requests", "requests", "#2563eb"), ("hits", "hits", "#16a34a"), ("misses", "misses", "#ea580c")]
        ),
        Chart(
            title: "Body bytes per second", latency: false, format: .byteRate,
            series: [("bytesFromCache", "from cache", "#16a34a"), ("bytesFromOrigin", "from origin", "#ea580c")]),
        Chart(
            title: "Origin errors per second", latency: false, format: .rate,
            series: [("originErrors", "origin errors", "#dc2626")]),
        Chart(
            title: "Hit latency", latency: true, format: .micros,
            series: [("hitP50", "p50", "#16a34a"), ("hitP99", "p99", "#065f46")]),
        Chart(
            title: "Miss latency", latency: true, format: .micros,
            series: [("missP50", "p50", "#ea580c"), ("missP99", "p99", "#7c2d12")]),
    ]

    /// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in element content and in quoted
    /// attribute values. Every text that came from outside (a URL, an error) goes through it.
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    /// `value` written as `format` writes it (the script's `fmt` writes the same).
    package static func formatted(_ value: Double?, _ format: Format) -> String {
        guard let value else { return "–" }
        switch format {
        case .int: return String(Int(value))
        case .rate: return String(format: "%.1f", value)
        case .pct: return String(format: "%.1f %%", value * 100)
        case .bytes: return bytes(value)
        case .byteRate: return bytes(value) + "/s"
        case .micros:
            if value < 1000 { return "\(Int(value)) µs" }
            return value < 1_000_000 ? String(format: "%.1f ms", value / 1000) : String(format: "%.1f s", value / 1e6)
        case .seconds: return formatted(value * 1e6, .micros)
        case .duration:
            let seconds = Int(value)
            let (days, hours, minutes) = (seconds / 86400, seconds / 3600 % 24, seconds / 60 % 60)
            if days > 0 { return "\(days)d \(hours)h" }
            if hours > 0 { return "\(hours)h \(minutes)m" }
            return minutes > 0 ? "\(minutes)m \(seconds % 60)s" : "\(seconds)s"
        case .time: return HTTPDate.iso8601(Timestamp(secondsSince1970: value.rounded(.down)))
        case .text: return String(value)
        }
    }

    private static func bytes(_ value: Double) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        guard value >= 1024 else { return "\(Int(value)) B" }
        var scaled = value / 1024
        var unit = 0
        while scaled >= 1024 && unit < units.count - 1 {
            scaled /= 1024
            unit += 1
        }
        return String(format: "%.1f ", scaled) + units[unit]
    }

    /// One chart series as points: 360 steps of ``step`` seconds.
    static func stepped(_ values: [Int?], latency: Bool) -> [Double?] {
        stride(from: 0, to: values.count, by: step).map { start in
            let slice = values[start..<min(start + step, values.count)]
            if latency { return slice.compactMap { $0 }.max().map(Double.init) }
            return Double(slice.reduce(0) { $0 + ($1 ?? 0) }) / Double(step)
        }
    }

    /// The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1).
    static func scaleTop(_ value: Double) -> Double {
        var top = 1.0
        while top < value {
            for factor in [2.0, 2.5, 2] where top < value { top *= factor }
        }
        return top
    }

    /// An SVG path through `points` on a 359×100 box scaled to `top`, broken where a point
    /// is missing.
    static func path(_ points: [Double?], top: Double) -> String {
        var path = ""
        var drawing = false
        for (index, point) in points.enumerated() {
            guard let point else {
                drawing = false
                continue
            }
            let y = 100 - min(point, top) / top * 100
            path += (drawing ? "L" : "M") + "\(index) " + String(format: "%.1f", y)
            drawing = true
        }
        return path
    }

    private static func history(_ history: ProxyStatus.History, _ field: String) -> [Int?] {
        switch field {
        case "requests": history.requests
        case "hits": history.hits
        case "misses": history.misses
        case "originErrors": history.originErrors
        case "bytesFromCache": history.bytesFromCache
        case "bytesFromOrigin": history.bytesFromOrigin
        case "hitP50": history.hitP50
        case "hitP99": history.hitP99
        case "missP50": history.missP50
        default: history.missP99
        }
    }

    private static func chart(_ chart: Chart, _ history: ProxyStatus.History) -> String {
        let points = chart.series.map { stepped(Self.history(history, $0.field), latency: chart.latency) }
        let top = scaleTop(points.flatMap { $0.compactMap { $0 } }.max() ?? 0)
        let legend = chart.series.map { "<span style=\"color:\($0.color)\">■</span> \($0.label)" }.joined(
            separator: " ")
        let paths = zip(chart.series, points).map { series, points in
            "<path fill=\"none\" stroke=\"\(series.color)\" stroke-width=\"1.5\" vector-effect=\"non-scaling-stroke\" d=\"\(path(points, top: top))\"/>"
        }
        return """
            <section class="chart"><h3>\(chart.title) <small>\(legend)</small></h3>
            <div class="plot"><span class="top" data-top data-f="\(chart.format.rawValue)">\(formatted(top, chart.format))</span>
            <svg viewBox="0 0 359 100" preserveAspectRatio="none" role="img" aria-label="\(chart.title), last hour" \
            data-series="\(chart.series.map(\.field).joined(separator: ","))" data-latency="\(chart.latency)">
            <path class="grid" d="M0 25H359M0 50H359M0 75H359" vector-effect="non-scaling-stroke"/>
            \(paths.joined(separator: "\n"))
            </svg></div><div class="axis"><span>−60 min</span><span>−30 min</span><span>now</span></div></section>
            """
    }

    /// A figure the script keeps up to date.
    private static func figure(_ key: String, _ value: Double?, _ format: Format) -> String {
        "<span data-k=\"\(key)\" data-f=\"\(format.rawValue)\">\(escaped(formatted(value, format)))</span>"
    }

    private static func tile(_ label: String, _ body: String) -> String {
        "<div class=\"tile\"><div class=\"label\">\(label)</div><div class=\"value\">\(body)</div></div>"
    }

    private static func row(_ cells: [String]) -> String {
        "<tr>" + cells.map { "<td>\($0)</td>" }.joined() + "</tr>"
    }

    /// The tiers' rows (the script builds the same).
    private static func tierRows(_ tiers: [ProxyStatus.Tier]) -> String {
        tiers.map { tier in
            let fill = tier.capacityBytes.flatMap { $0 > 0 ? Double(tier.bodyBytes) / Double($0) : nil }
            return row([
                escaped(tier.name), String(tier.entries), formatted(Double(tier.bodyBytes), .bytes),
                formatted(tier.capacityBytes.map(Double.init), .bytes), formatted(fill, .pct),
            ])
        }.joined()
    }

    private static func busyRows(_ busiest: [ProxyStatus.BusyTarget]) -> String {
        busiest.map { row([String($0.count), "<code>\(escaped($0.target))</code>"]) }.joined()
    }

    /// The whole page for `status`; its script reads `jsonPath`.
    static func html(_ status: ProxyStatus, jsonPath: String) -> String {
        let recent = status.recent
        let totals = status.totals
        let tiles = [
            tile("Requests/s", figure("recent.requestsPerSecond", recent.requestsPerSecond, .rate)),
            tile("Hit ratio", figure("recent.hitRatio", recent.hitRatio, .pct)),
            tile(
                "From cache / origin",
                figure("recent.bytesFromCachePerSecond", recent.bytesFromCachePerSecond, .byteRate) + " / "
                    + figure("recent.bytesFromOriginPerSecond", recent.bytesFromOriginPerSecond, .byteRate)),
            tile("Origin errors/s", figure("recent.originErrorsPerSecond", recent.originErrorsPerSecond, .rate)),
            tile(
                "Hit p50 / p99",
                figure("recent.hitLatency.p50Microseconds", recent.hitLatency.p50Microseconds.map(Double.init), .micros)
                    + " / "
                    + figure(
                        "recent.hitLatency.p99Microseconds", recent.hitLatency.p99Microseconds.map(Double.init), .micros
                    )),
            tile(
                "Miss p50 / p99",
                figure(
                    "recent.missLatency.p50Microseconds", recent.missLatency.p50Microseconds.map(Double.init), .micros)
                    + " / "
                    + figure(
                        "recent.missLatency.p99Microseconds", recent.missLatency.p99Microseconds.map(Double.init),
                        .micros)),
            tile("Entries", figure("entries", Double(status.entries), .int)),
            tile("Connections", figure("connectionsOpen", Double(status.connectionsOpen), .int)),
        ]
        let sinceStart = [
            ("Requests", "totals.requests", Double(totals.requests), Format.int),
            ("Hits", "totals.hits", Double(totals.hits), .int),
            ("Misses", "totals.misses", Double(totals.misses), .int),
            ("Hit ratio", "totals.hitRatio", totals.hitRatio, .pct),
            ("Proxy errors", "totals.errors", Double(totals.errors), .int),
            ("Bytes from cache", "totals.bytesFromCache", Double(totals.bytesFromCache), .bytes),
            ("Bytes from origin", "totals.bytesFromOrigin", Double(totals.bytesFromOrigin), .bytes),
            ("Origin requests", "totals.originRequests", Double(totals.originRequests), .int),
            ("Origin errors", "totals.originErrors", Double(totals.originErrors), .int),
        ].map { label, key, value, format in row([label, figure(key, value, format)]) }.joined()
        let redis = status.redis
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escaped(status.name)) status</title><link rel="icon" href="data:,">
            <style>\(style)</style></head>
            <body data-json="\(escaped(jsonPath))">
            <header><h1>\(escaped(status.name))</h1>
            <p>version <span data-k="version" data-f="text">\(escaped(status.version))</span> · up \
            \(figure("uptimeSeconds", status.uptimeSeconds, .duration)) · at \(figure("time", status.time, .time)) \
            <span id="live">(reload for new figures)</span></p></header>
            <main>
            <p class="note">Rates, hit ratio and latencies: the last \(recent.seconds) complete seconds. Latency: from the \
            request reaching the proxy's handler to its response head, as the upper bound of its histogram bucket \
            (50 µs … 10 s in steps of 1, 2.5, 5). Hits: hit and stale; misses: miss, revalidated and pass.</p>
            <div class="tiles">\(tiles.joined())</div>
            <div class="charts">\(charts.map { chart($0, status.history) }.joined(separator: "\n"))</div>
            <div class="tables">
            <section><h2>Since start</h2><table>\(sinceStart)</table></section>
            <section><h2>Store</h2><table><thead><tr><th>Tier</th><th>Entries</th><th>Bodies</th><th>Capacity</th>\
            <th>Fill</th></tr></thead><tbody id="tiers">\(tierRows(status.tiers))</tbody></table></section>
            <section><h2>Origin</h2><table>
            \(row(["Error rate (5 min)", figure("origin.errorRate", status.origin.errorRate, .pct)]))
            \(row(["Last error", "<span data-k=\"origin.lastError\" data-f=\"text\">\(escaped(status.origin.lastError ?? "none"))</span>"]))
            \(row(["At", figure("origin.lastErrorTime", status.origin.lastErrorTime, .time)]))
            </table></section>
            <section id="redis"\(redis == nil ? " hidden" : "")><h2>Redis</h2><table>
            \(row(["Round trips", figure("redis.roundTrips", redis.map { Double($0.roundTrips) }, .int)]))
            \(row(["Errors", figure("redis.errors", redis.map { Double($0.errors) }, .int)]))
            \(row(["Timeouts", figure("redis.timeouts", redis.map { Double($0.timeouts) }, .int)]))
            \(row(["Mean round trip", figure("redis.meanRoundTripSeconds", redis.map(\.meanRoundTripSeconds), .seconds)]))
            \(row(["Slowest", figure("redis.slowestRoundTripSeconds", redis.map(\.slowestRoundTripSeconds), .seconds)]))
            </table></section>
            <section class="wide"><h2>Busiest URLs <small>(recent; counts halve every minute)</small></h2>\
            <table><thead><tr><th>Count</th><th>Request target</th></tr></thead><tbody id="busiest">\
            \(busyRows(status.busiest))</tbody></table></section>
            </div></main>
            <script>\(script)</script>
            </body></html>
            """
    }

    private static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f8fafc;color:#0f172a}
        header{background:#0f172a;color:#f8fafc;padding:.6em 1em}header h1{margin:0;font-size:1.3em}header p{margin:.2em 0 0}
        main{padding:1em}.note{color:#475569;font-size:.85em;margin-top:0}
        .tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(140px,1fr));gap:.6em}
        .tile{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:.5em .7em}
        .label{color:#64748b;font-size:.8em}.value{font-size:1.25em;font-weight:600}
        .charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:.8em;margin-top:1em}
        .chart{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:.5em .7em}
        .chart h3{margin:0 0 .3em;font-size:.95em}.chart small{font-weight:400;color:#475569}
        .plot{position:relative}.plot svg{width:100%;height:130px;display:block;border-left:1px solid #cbd5e1;border-bottom:1px solid #cbd5e1}
        .top{position:absolute;right:0;top:-1.3em;font-size:.75em;color:#64748b}
        .grid{stroke:#e2e8f0;fill:none}.axis{display:flex;justify-content:space-between;font-size:.75em;color:#64748b}
        .tables{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:.8em;margin-top:1em}
        .tables section{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:.5em .7em;overflow-x:auto}
        .tables .wide{grid-column:1/-1}h2{font-size:1em;margin:0 0 .4em}
        table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.15em .5em .15em 0;border-bottom:1px solid #f1f5f9}
        code{word-break:break-all}
        @media (max-width:500px){.charts{grid-template-columns:1fr}}
        """

    /// Fetches the JSON every 2 s and redraws what the server drew; the same formats, the
    /// same steps and scales as the Swift above.
    private static let script = """
        (function(){
        const step=\(step);
        function bytes(v){const u=['KiB','MiB','GiB','TiB'];if(v<1024)return Math.trunc(v)+' B';let s=v/1024,i=0;while(s>=1024&&i<u.length-1){s/=1024;i++}return s.toFixed(1)+' '+u[i]}
        function fmt(v,f){if(v===null||v===undefined)return '–';switch(f){
        case 'int':return String(Math.trunc(v));case 'rate':return v.toFixed(1);case 'pct':return (v*100).toFixed(1)+' %';
        case 'bytes':return bytes(v);case 'byteRate':return bytes(v)+'/s';
        case 'micros':return v<1000?Math.trunc(v)+' µs':v<1e6?(v/1000).toFixed(1)+' ms':(v/1e6).toFixed(1)+' s';case 'seconds':return fmt(v*1e6,'micros');
        case 'duration':{const s=Math.trunc(v),d=Math.trunc(s/86400),h=Math.trunc(s/3600)%24,m=Math.trunc(s/60)%60;
        return d>0?d+'d '+h+'h':h>0?h+'h '+m+'m':m>0?m+'m '+(s%60)+'s':s+'s'}
        case 'time':return new Date(Math.floor(v)*1000).toISOString().replace(/\\.\\d+Z$/,'Z');
        default:return String(v)}}
        function get(o,k){for(const p of k.split('.')){if(o===null||o===undefined)return null;o=o[p]}return o}
        function stepped(vs,lat){const out=[];for(let i=0;i<vs.length;i+=step){const s=vs.slice(i,i+step);
        if(lat){const n=s.filter(x=>x!==null);out.push(n.length?Math.max(...n):null)}else{out.push(s.reduce((a,x)=>a+(x||0),0)/step)}}return out}
        function top(v){let t=1;while(t<v){for(const f of [2,2.5,2]){if(t<v)t*=f}}return t}
        function path(ps,t){let d='',on=false;ps.forEach((p,i)=>{if(p===null){on=false;return}
        d+=(on?'L':'M')+i+' '+(100-Math.min(p,t)/t*100).toFixed(1);on=true});return d}
        function rows(id,list){const body=document.getElementById(id);body.replaceChildren(...list.map(cells=>{
        const tr=document.createElement('tr');cells.forEach(c=>{const td=document.createElement('td');
        if(c.code){const e=document.createElement('code');e.textContent=c.code;td.append(e)}else td.textContent=c;tr.append(td)});return tr}))}
        function draw(s){
        document.querySelectorAll('[data-k]').forEach(e=>{const v=get(s,e.dataset.k),f=e.dataset.f;
        e.textContent=e.dataset.k==='origin.lastError'?(v||'none'):fmt(v,f)});
        document.querySelectorAll('svg[data-series]').forEach(svg=>{const lat=svg.dataset.latency==='true';
        const ps=svg.dataset.series.split(',').map(k=>stepped(s.history[k],lat));
        const t=top(Math.max(0,...ps.flat().filter(x=>x!==null)));
        svg.querySelectorAll('path:not(.grid)').forEach((p,i)=>p.setAttribute('d',path(ps[i],t)));
        const label=svg.parentNode.querySelector('[data-top]');label.textContent=fmt(t,label.dataset.f)});
        rows('tiers',s.tiers.map(t=>[t.name,String(t.entries),fmt(t.bodyBytes,'bytes'),fmt(t.capacityBytes,'bytes'),
        fmt(t.capacityBytes>0?t.bodyBytes/t.capacityBytes:null,'pct')]));
        rows('busiest',s.busiest.map(b=>[String(b.count),{code:b.target}]));
        document.getElementById('redis').hidden=!s.redis}
        const live=document.getElementById('live');
        async function refresh(){try{const r=await fetch(document.body.dataset.json,{cache:'no-store'});
        if(!r.ok)throw new Error('HTTP '+r.status);draw(await r.json());live.textContent='(live, every 2 s)'}
        catch(e){live.textContent='(live updates stopped: '+e.message+'; reload the page)'}}
        live.textContent='(updating every 2 s)';setInterval(refresh,2000)})();
        """
}
#endif
