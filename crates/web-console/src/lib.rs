//! The web console served at `/_utils`: a few static files (HTML, a script
//! and a style sheet) compiled into the binary, so the console works on a
//! machine with no network and no separate web server. The pages talk to
//! the server's own CouchDB API from the browser.

use std::path::Path;

/// One file of the console.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!("../assets/", $name)),
        }
    };
}

macro_rules! script {
    ($name:literal) => {
        asset!($name, "text/javascript; charset=utf-8")
    };
}

/// Every file of the console; `index.html` is the page and `app.js` the
/// module it loads, which imports the others (`lib/` for what pages
/// share, `pages/` for one page each).
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    script!("app.js"),
    script!("lib/api.js"),
    script!("lib/conflicts.js"),
    script!("lib/dom.js"),
    script!("lib/forms.js"),
    script!("lib/json-editor.js"),
    script!("lib/paths.js"),
    script!("lib/rights.js"),
    script!("lib/shell.js"),
    script!("lib/widgets.js"),
    script!("pages/activity.js"),
    script!("pages/conflicts.js"),
    script!("pages/database.js"),
    script!("pages/databases.js"),
    script!("pages/document.js"),
    script!("pages/mango.js"),
    script!("pages/permissions.js"),
    script!("pages/replication.js"),
    script!("pages/search.js"),
    script!("pages/server.js"),
    script!("pages/server-live.js"),
    script!("pages/users.js"),
    script!("pages/views.js"),
    script!("pages/views-common.js"),
    script!("pages/views-edit.js"),
    script!("pages/views-run.js"),
];

/// The file served for `name` (a path below `/_utils/`; empty for the page).
pub fn asset(name: &str) -> Option<Asset> {
    let name = if name.is_empty() { "index.html" } else { name };
    ASSETS.iter().find(|a| a.name == name).copied()
}

/// The file's bytes: the compiled-in ones, or, while developing the
/// console, the same file read from `dev_dir` (only names of the console's
/// own files are ever read, so no path from a request reaches the disk).
pub fn bytes(asset: &Asset, dev_dir: Option<&Path>) -> std::borrow::Cow<'static, [u8]> {
    if let Some(dir) = dev_dir
        && let Ok(bytes) = std::fs::read(dir.join(asset.name))
    {
        return bytes.into();
    }
    asset.bytes.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_files_are_found_and_nothing_else() {
        let page = asset("").expect("the page");
        assert_eq!(page.name, "index.html");
        assert!(std::str::from_utf8(page.bytes).is_ok_and(|t| t.contains("app.js")));
        assert!(asset("app.js").is_some());
        assert!(asset("pages/replication.js").is_some());
        for name in [
            "../Cargo.toml",
            "assets/app.js",
            "/etc/passwd",
            "nope.js",
            "lib/../app.js",
            "pages",
        ] {
            assert!(asset(name).is_none(), "{name}");
        }
    }

    /// A module added to `assets/` but not to `ASSETS` would be a 404 in
    /// the browser and a blank console: every file there must be served.
    #[test]
    fn every_file_in_the_assets_folder_is_served() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        let mut found = Vec::new();
        let mut folders = vec![root.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).expect("the assets folder") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    let name = path.strip_prefix(&root).expect("below the root");
                    found.push(name.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        found.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
        served.sort();
        assert_eq!(found, served);
    }
}
