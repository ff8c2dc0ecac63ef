use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "recliner-config-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn defaults_are_couchdbs_port_on_loopback_and_a_local_data_folder() {
    let config = Config::load(None, &FlagOverrides::default(), &[]).unwrap();
    assert_eq!(config.port, 5984);
    assert_eq!(config.bind.to_string(), "127.0.0.1");
    assert_eq!(config.data_dir, PathBuf::from("./data"));
}

#[test]
fn the_store_is_sqlite_by_default_or_a_postgres_url_whose_password_never_shows() {
    let config = Config::load(None, &FlagOverrides::default(), &[]).unwrap();
    assert_eq!(config.store, "");
    assert_eq!(config.store_shown(), "SQLite in ./data");
    let url = "postgres://recliner:hunter2@db.example:5432/couch";
    let config = Config::load(
        None,
        &FlagOverrides::default(),
        &env(&[("RECLINER_STORE", url)]),
    )
    .unwrap();
    config.validate().unwrap();
    assert_eq!(config.store, url);
    assert_eq!(
        config.store_shown(),
        "postgres://recliner:*****@db.example:5432/couch"
    );
    let flags = FlagOverrides {
        store: Some("mysql://nope".into()),
        ..FlagOverrides::default()
    };
    let refused = Config::load(None, &flags, &[]).unwrap().validate();
    assert!(refused.unwrap_err().contains("setting `store`"));
}

#[test]
fn file_beats_defaults_env_beats_file_and_flags_beat_env() {
    let dir = temp_dir();
    let file = dir.join("custom.toml");
    std::fs::write(
        &file,
        "port = 1111\nlog_level = \"debug\"\nbind = \"0.0.0.0\"\n",
    )
    .unwrap();

    let from_file = Config::load(Some(&file), &FlagOverrides::default(), &[]).unwrap();
    assert_eq!(
        (from_file.port, from_file.log_level.as_str()),
        (1111, "debug")
    );

    let vars = env(&[("RECLINER_PORT", "2222"), ("RECLINER_CONFIG", "ignored")]);
    let from_env = Config::load(Some(&file), &FlagOverrides::default(), &vars).unwrap();
    assert_eq!(from_env.port, 2222);
    assert_eq!(
        from_env.bind.to_string(),
        "0.0.0.0",
        "the file still applies below env"
    );

    let flags = FlagOverrides {
        port: Some(3333),
        ..Default::default()
    };
    let from_flag = Config::load(Some(&file), &flags, &vars).unwrap();
    assert_eq!(from_flag.port, 3333);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_file_in_the_data_folder_is_read_when_no_path_is_given() {
    let dir = temp_dir();
    std::fs::write(dir.join(CONFIG_FILE_NAME), "port = 4444\n").unwrap();
    let flags = FlagOverrides {
        data_dir: Some(dir.clone()),
        ..Default::default()
    };
    assert_eq!(Config::load(None, &flags, &[]).unwrap().port, 4444);
    let vars = env(&[("RECLINER_DATA_DIR", dir.to_str().unwrap())]);
    assert_eq!(
        Config::load(None, &FlagOverrides::default(), &vars)
            .unwrap()
            .port,
        4444
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_bad_value_names_the_setting() {
    let err = Config::load(
        None,
        &FlagOverrides::default(),
        &env(&[("RECLINER_PORT", "99999")]),
    )
    .unwrap_err();
    assert!(err.contains("`port`"), "{err}");
    let err = Config::load(
        None,
        &FlagOverrides::default(),
        &env(&[("RECLINER_BIND", "nope")]),
    )
    .unwrap_err();
    assert!(err.contains("`bind`"), "{err}");
}

#[test]
fn cors_origins_come_as_a_list_or_a_comma_separated_string() {
    let vars = env(&[
        ("RECLINER_CORS_ENABLED", "true"),
        (
            "RECLINER_CORS_ORIGINS",
            "https://a.example, https://b.example",
        ),
    ]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert_eq!(
        config.cors_origins,
        ["https://a.example", "https://b.example"]
    );
    assert!(config.validate().is_ok());
    let cors = config.api_config().cors.unwrap();
    assert_eq!(cors.methods.len(), 5, "CouchDB's default methods");

    let dir = temp_dir();
    let file = dir.join("cors.toml");
    std::fs::write(&file, "cors_enabled = true\ncors_origins = [\"*\"]\n").unwrap();
    let config = Config::load(Some(&file), &FlagOverrides::default(), &[]).unwrap();
    assert_eq!(config.cors_origins, ["*"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn inconsistent_settings_are_refused_by_name() {
    let vars = env(&[("RECLINER_CORS_ENABLED", "true")]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert!(config.validate().unwrap_err().contains("`cors_origins`"));
    let vars = env(&[("RECLINER_MAX_DOCUMENT_SIZE", "0")]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert!(
        config
            .validate()
            .unwrap_err()
            .contains("`max_document_size`")
    );
    let vars = env(&[("RECLINER_MAX_DBS_OPEN", "0")]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert!(config.validate().unwrap_err().contains("`max_dbs_open`"));
    let vars = env(&[("RECLINER_MAX_DBS_OPEN", "20")]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert_eq!(config.store_options().max_dbs_open, 20);
    let vars = env(&[("RECLINER_DURABILITY", "sometimes")]);
    let err = Config::load(None, &FlagOverrides::default(), &vars).unwrap_err();
    assert!(err.contains("`durability`"), "{err}");
}

#[test]
fn recliner_variables_that_are_not_settings_are_left_alone() {
    let vars = env(&[
        ("RECLINER_BIN", "/somewhere"),
        ("RECLINER_", "x"),
        ("RECLINER_PORT", "7"),
    ]);
    let config = Config::load(None, &FlagOverrides::default(), &vars).unwrap();
    assert_eq!(config.port, 7);
}

#[test]
fn an_unknown_setting_in_the_file_is_refused() {
    let dir = temp_dir();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "prot = 1\n").unwrap();
    let err = Config::load(Some(&file), &FlagOverrides::default(), &[]).unwrap_err();
    assert!(err.contains("prot"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
