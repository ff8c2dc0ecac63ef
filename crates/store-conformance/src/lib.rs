//! The store's conformance suite: CouchDB's rules as the store keeps them
//! (databases, documents, attachments, feeds, local documents, purge,
//! compaction, indexes, health, many databases, the writer thread), written once and run on
//! each backend. A backend's tests call [`conformance_tests!`] once with a
//! function that opens its [`Backend`] (or `None` to skip, printing why),
//! which expands to one named test per case; [`many_databases_tests!`]
//! goes in a test binary of its own, because those tests count the
//! process's threads and descriptors.

#![allow(clippy::unwrap_used)] // a test suite: a failed unwrap is a failed test

pub mod attachments;
pub mod common;
pub mod compaction;
pub mod databases;
pub mod doc_access;
pub mod documents;
pub mod feeds;
pub mod health;
pub mod index;
pub mod local_docs;
pub mod many_databases;
pub mod purge;
pub mod time_seq;
pub mod writer;

use std::path::Path;

use store::{Store, StoreOptions};

/// A backend under test: makes stores on new, empty places of its own.
pub trait Backend {
    /// A store on a new, empty place named `id` (a data folder, a
    /// schema), with `dir` for the node's own files.
    fn create(&self, id: &str, dir: &Path, options: StoreOptions) -> (Store, Box<dyn Place>);
}

/// Where one test's databases are; dropping it removes them.
pub trait Place: std::fmt::Debug {
    /// Another store on the same databases (a restart, or a second node).
    fn reopen(&self, dir: &Path, options: StoreOptions) -> Store;
    /// Whether the databases are files in the data folder.
    fn keeps_db_files(&self) -> bool;
}

/// One test per case of the suite (in modules named after
/// their groups), on the backend `$open()` returns (`Option<impl Backend>`:
/// `None` skips every test). The calling crate needs `tokio` (with
/// `macros` and `rt-multi-thread`) among its dev-dependencies.
#[macro_export]
macro_rules! conformance_tests {
    ($open:path) => {
        pub mod attachments {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn inline_attachments_are_stored_and_kept_by_stubs() {
                let Some(backend) = $open() else { return };
                $crate::attachments::inline_attachments_are_stored_and_kept_by_stubs(&backend).await;
            }
            #[tokio::test]
            async fn a_stub_with_nothing_to_keep_fails_the_whole_request() {
                let Some(backend) = $open() else { return };
                $crate::attachments::a_stub_with_nothing_to_keep_fails_the_whole_request(&backend).await;
            }
            #[tokio::test]
            async fn identical_bytes_are_stored_once() {
                let Some(backend) = $open() else { return };
                $crate::attachments::identical_bytes_are_stored_once(&backend).await;
            }
            #[tokio::test]
            async fn a_large_upload_is_chunked_and_read_back_chunk_by_chunk() {
                let Some(backend) = $open() else { return };
                $crate::attachments::a_large_upload_is_chunked_and_read_back_chunk_by_chunk(&backend).await;
            }
            #[tokio::test]
            async fn replicated_stubs_resolve_by_digest_and_atts_since_skips_known_bytes() {
                let Some(backend) = $open() else { return };
                $crate::attachments::replicated_stubs_resolve_by_digest_and_atts_since_skips_known_bytes(&backend).await;
            }
            #[tokio::test]
            async fn gzip_encoded_attachments_are_kept_encoded_and_inflated_for_inline_json() {
                let Some(backend) = $open() else { return };
                $crate::attachments::gzip_encoded_attachments_are_kept_encoded_and_inflated_for_inline_json(&backend).await;
            }
            #[tokio::test]
            async fn compaction_never_takes_bytes_uploaded_for_a_write_still_to_come() {
                let Some(backend) = $open() else { return };
                $crate::attachments::compaction_never_takes_bytes_uploaded_for_a_write_still_to_come(&backend).await;
            }
            #[tokio::test]
            async fn a_declared_length_is_checked_against_the_bytes_never_trusted() {
                let Some(backend) = $open() else { return };
                $crate::attachments::a_declared_length_is_checked_against_the_bytes_never_trusted(&backend).await;
            }
        }
        pub mod compaction {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn compaction_keeps_leaves_and_drops_everything_else() {
                let Some(backend) = $open() else { return };
                $crate::compaction::compaction_keeps_leaves_and_drops_everything_else(&backend).await;
            }
            #[tokio::test]
            async fn garbage_grows_with_edits_and_goes_with_compaction() {
                let Some(backend) = $open() else { return };
                $crate::compaction::garbage_grows_with_edits_and_goes_with_compaction(&backend).await;
            }
            #[tokio::test]
            async fn automatic_compaction_compacts_databases_full_of_garbage() {
                let Some(backend) = $open() else { return };
                $crate::compaction::automatic_compaction_compacts_databases_full_of_garbage(&backend).await;
            }
        }
        pub mod databases {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn a_database_is_created_once_listed_and_deleted() {
                let Some(backend) = $open() else { return };
                $crate::databases::a_database_is_created_once_listed_and_deleted(&backend).await;
            }
            #[tokio::test]
            async fn illegal_names_are_refused_with_couchdbs_reason() {
                let Some(backend) = $open() else { return };
                $crate::databases::illegal_names_are_refused_with_couchdbs_reason(&backend).await;
            }
            #[tokio::test]
            async fn a_deleted_database_comes_back_empty_when_recreated() {
                let Some(backend) = $open() else { return };
                $crate::databases::a_deleted_database_comes_back_empty_when_recreated(&backend).await;
            }
            #[tokio::test]
            async fn identity_and_data_survive_reopening_the_store() {
                let Some(backend) = $open() else { return };
                $crate::databases::identity_and_data_survive_reopening_the_store(&backend).await;
            }
            #[tokio::test]
            async fn info_reports_counts_and_sizes() {
                let Some(backend) = $open() else { return };
                $crate::databases::info_reports_counts_and_sizes(&backend).await;
            }
            #[tokio::test]
            async fn revs_limit_and_security_are_stored() {
                let Some(backend) = $open() else { return };
                $crate::databases::revs_limit_and_security_are_stored(&backend).await;
            }
            #[tokio::test]
            async fn full_durability_and_ensure_full_commit_work() {
                let Some(backend) = $open() else { return };
                $crate::databases::full_durability_and_ensure_full_commit_work(&backend).await;
            }
        }
        pub mod documents {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn a_document_is_created_updated_and_read_back() {
                let Some(backend) = $open() else { return };
                $crate::documents::a_document_is_created_updated_and_read_back(&backend).await;
            }
            #[tokio::test]
            async fn the_same_edit_gives_the_same_revision_in_two_databases() {
                let Some(backend) = $open() else { return };
                $crate::documents::the_same_edit_gives_the_same_revision_in_two_databases(&backend).await;
            }
            #[tokio::test]
            async fn conflicts_are_per_document_rows_and_the_others_are_written() {
                let Some(backend) = $open() else { return };
                $crate::documents::conflicts_are_per_document_rows_and_the_others_are_written(&backend).await;
            }
            #[tokio::test]
            async fn deleted_documents_answer_deleted_and_can_be_recreated() {
                let Some(backend) = $open() else { return };
                $crate::documents::deleted_documents_answer_deleted_and_can_be_recreated(&backend).await;
            }
            #[tokio::test]
            async fn replicated_revisions_merge_into_conflicts_with_a_deterministic_winner() {
                let Some(backend) = $open() else { return };
                $crate::documents::replicated_revisions_merge_into_conflicts_with_a_deterministic_winner(&backend).await;
            }
            #[tokio::test]
            async fn a_replicated_write_without_a_revision_fails_the_whole_request() {
                let Some(backend) = $open() else { return };
                $crate::documents::a_replicated_write_without_a_revision_fails_the_whole_request(&backend).await;
            }
            #[tokio::test]
            async fn deleting_a_losing_branch_resolves_the_conflict() {
                let Some(backend) = $open() else { return };
                $crate::documents::deleting_a_losing_branch_resolves_the_conflict(&backend).await;
            }
            #[tokio::test]
            async fn latest_reads_the_leaf_below_an_old_revision_and_local_seq_shows_the_sequence() {
                let Some(backend) = $open() else { return };
                $crate::documents::latest_reads_the_leaf_below_an_old_revision_and_local_seq_shows_the_sequence(&backend).await;
            }
            #[tokio::test]
            async fn stemming_to_revs_limit_drops_old_history_but_keeps_leaves() {
                let Some(backend) = $open() else { return };
                $crate::documents::stemming_to_revs_limit_drops_old_history_but_keeps_leaves(&backend).await;
            }
            #[tokio::test]
            async fn open_revs_answers_leaves_and_missing_revisions() {
                let Some(backend) = $open() else { return };
                $crate::documents::open_revs_answers_leaves_and_missing_revisions(&backend).await;
            }
            #[tokio::test]
            async fn revs_diff_and_bulk_get_serve_the_replicator() {
                let Some(backend) = $open() else { return };
                $crate::documents::revs_diff_and_bulk_get_serve_the_replicator(&backend).await;
            }
            #[tokio::test]
            async fn a_large_batch_naming_a_document_twice_sees_its_first_edit() {
                let Some(backend) = $open() else { return };
                $crate::documents::a_large_batch_naming_a_document_twice_sees_its_first_edit(&backend).await;
            }
            #[tokio::test]
            async fn a_large_batch_that_fails_midway_writes_nothing() {
                let Some(backend) = $open() else { return };
                $crate::documents::a_large_batch_that_fails_midway_writes_nothing(&backend).await;
            }
            #[tokio::test]
            async fn large_bodies_are_stored_compressed_and_read_back_everywhere() {
                let Some(backend) = $open() else { return };
                $crate::documents::large_bodies_are_stored_compressed_and_read_back_everywhere(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_paced_bulk_write_from_a_blocking_thread_writes_everything() {
                let Some(backend) = $open() else { return };
                $crate::documents::a_paced_bulk_write_from_a_blocking_thread_writes_everything(&backend).await;
            }
            #[tokio::test]
            async fn ids_with_nul_and_u0001_are_kept_and_ordered_by_their_bytes() {
                let Some(backend) = $open() else { return };
                $crate::documents::ids_with_nul_and_u0001_are_kept_and_ordered_by_their_bytes(&backend).await;
            }
        }
        pub mod feeds {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn offsets_and_counts_follow_every_kind_of_write() {
                let Some(backend) = $open() else { return };
                $crate::feeds::offsets_and_counts_follow_every_kind_of_write(&backend).await;
            }
            #[tokio::test]
            async fn each_document_appears_once_at_its_latest_sequence() {
                let Some(backend) = $open() else { return };
                $crate::feeds::each_document_appears_once_at_its_latest_sequence(&backend).await;
            }
            #[tokio::test]
            async fn all_docs_style_lists_every_leaf_and_include_docs_embeds_the_winner() {
                let Some(backend) = $open() else { return };
                $crate::feeds::all_docs_style_lists_every_leaf_and_include_docs_embeds_the_winner(&backend).await;
            }
            #[tokio::test]
            async fn a_doc_ids_filter_still_advances_last_seq_to_the_end() {
                let Some(backend) = $open() else { return };
                $crate::feeds::a_doc_ids_filter_still_advances_last_seq_to_the_end(&backend).await;
            }
            #[tokio::test]
            async fn subscribers_wake_when_a_commit_moves_the_sequence() {
                let Some(backend) = $open() else { return };
                $crate::feeds::subscribers_wake_when_a_commit_moves_the_sequence(&backend).await;
            }
            #[tokio::test]
            async fn all_docs_orders_by_code_point_and_honours_ranges() {
                let Some(backend) = $open() else { return };
                $crate::feeds::all_docs_orders_by_code_point_and_honours_ranges(&backend).await;
            }
            #[tokio::test]
            async fn concurrent_writers_share_commits() {
                let Some(backend) = $open() else { return };
                $crate::feeds::concurrent_writers_share_commits(&backend).await;
            }
        }
        pub mod health {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn a_writable_data_folder_is_healthy_and_a_missing_one_is_not() {
                let Some(backend) = $open() else { return };
                $crate::health::a_writable_data_folder_is_healthy_and_a_missing_one_is_not(&backend).await;
            }
        }
        pub mod time_seq {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test(flavor = "multi_thread")]
            async fn commits_are_dated_in_bins_that_survive_a_reopen() {
                let Some(backend) = $open() else { return };
                $crate::time_seq::commits_are_dated_in_bins_that_survive_a_reopen(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn deleted_documents_past_a_ttl_are_purged() {
                let Some(backend) = $open() else { return };
                $crate::time_seq::deleted_documents_past_a_ttl_are_purged(&backend).await;
            }
        }
        pub mod purge {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test(flavor = "multi_thread")]
            async fn purge_infos_are_kept_up_to_the_limit_and_survive_a_reopen() {
                let Some(backend) = $open() else { return };
                $crate::purge::purge_infos_are_kept_up_to_the_limit_and_survive_a_reopen(&backend).await;
            }
        }
        pub mod index {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn counts_and_reduce_parts_match_the_rows() {
                let Some(backend) = $open() else { return };
                $crate::index::counts_and_reduce_parts_match_the_rows(&backend);
            }
            #[tokio::test]
            async fn block_reductions_are_kept_until_the_block_changes() {
                let Some(backend) = $open() else { return };
                $crate::index::block_reductions_are_kept_until_the_block_changes(&backend).await;
            }
            #[tokio::test]
            async fn sizes_count_the_live_rows_and_compaction_gives_the_rest_back() {
                let Some(backend) = $open() else { return };
                $crate::index::sizes_count_the_live_rows_and_compaction_gives_the_rest_back(&backend).await;
            }
        }
        pub mod doc_access {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn a_user_reads_only_documents_that_name_them_or_their_roles() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_user_reads_only_documents_that_name_them_or_their_roles(&backend).await;
            }
            #[tokio::test]
            async fn a_users_counts_are_of_their_documents() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_users_counts_are_of_their_documents(&backend).await;
            }
            #[tokio::test]
            async fn a_users_feed_starts_where_they_left_it() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_users_feed_starts_where_they_left_it(&backend).await;
            }
            #[tokio::test]
            async fn a_deletion_reaches_those_who_saw_the_document() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_deletion_reaches_those_who_saw_the_document(&backend).await;
            }
            #[tokio::test]
            async fn a_revoked_user_gets_a_tombstone_that_never_enters_the_tree() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_revoked_user_gets_a_tombstone_that_never_enters_the_tree(&backend).await;
            }
            #[tokio::test]
            async fn revocation_through_a_role_and_a_name_is_decided_by_what_is_left() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::revocation_through_a_role_and_a_name_is_decided_by_what_is_left(&backend).await;
            }
            #[tokio::test]
            async fn local_documents_are_read_by_those_they_name() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::local_documents_are_read_by_those_they_name(&backend).await;
            }
            #[tokio::test]
            async fn the_access_index_is_kept_with_each_write_and_survives_a_restart() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::the_access_index_is_kept_with_each_write_and_survives_a_restart(&backend).await;
            }
            #[tokio::test]
            async fn a_lost_access_index_is_rebuilt_when_the_database_is_opened() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::a_lost_access_index_is_rebuilt_when_the_database_is_opened(&backend).await;
            }
            #[tokio::test]
            async fn names_and_roles_with_nul_are_matched_exactly() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::names_and_roles_with_nul_are_matched_exactly(&backend).await;
            }
            #[test]
            fn feeds_and_listings_follow_a_model() {
                let Some(backend) = $open() else { return };
                $crate::doc_access::feeds_and_listings_follow_a_model(&backend);
            }
        }
        pub mod local_docs {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn local_documents_count_their_own_revisions() {
                let Some(backend) = $open() else { return };
                $crate::local_docs::local_documents_count_their_own_revisions(&backend).await;
            }
            #[tokio::test]
            async fn local_documents_never_show_in_changes_or_all_docs() {
                let Some(backend) = $open() else { return };
                $crate::local_docs::local_documents_never_show_in_changes_or_all_docs(&backend).await;
            }
            #[tokio::test]
            async fn local_docs_lists_them_in_id_order_within_a_range() {
                let Some(backend) = $open() else { return };
                $crate::local_docs::local_docs_lists_them_in_id_order_within_a_range(&backend).await;
            }
        }
        pub mod writer {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test(flavor = "multi_thread")]
            async fn a_panicking_write_fails_alone_and_the_database_keeps_working() {
                let Some(backend) = $open() else { return };
                $crate::writer::a_panicking_write_fails_alone_and_the_database_keeps_working(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn writes_failing_after_their_rows_leave_none_and_their_group_is_kept() {
                let Some(backend) = $open() else { return };
                $crate::writer::writes_failing_after_their_rows_leave_none_and_their_group_is_kept(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn the_writer_survives_a_panic_outside_any_write() {
                let Some(backend) = $open() else { return };
                $crate::writer::the_writer_survives_a_panic_outside_any_write(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn the_write_queue_makes_writers_wait_for_room() {
                let Some(backend) = $open() else { return };
                $crate::writer::the_write_queue_makes_writers_wait_for_room(&backend).await;
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn an_idle_writer_ends_and_the_next_write_starts_another() {
                let Some(backend) = $open() else { return };
                $crate::writer::an_idle_writer_ends_and_the_next_write_starts_another(&backend).await;
            }
        }
    };
}

/// The many-databases cases, for a test binary of their own: they count
/// the process's threads and file descriptors, which other tests running
/// beside them would disturb.
#[macro_export]
macro_rules! many_databases_tests {
    ($open:path) => {
        pub mod many_databases {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn many_databases_hold_threads_and_files_for_the_open_ones_only() {
                let Some(backend) = $open() else { return };
                $crate::many_databases::many_databases_hold_threads_and_files_for_the_open_ones_only(&backend);
            }
            #[test]
            fn a_database_in_use_is_never_closed_to_make_room() {
                let Some(backend) = $open() else { return };
                $crate::many_databases::a_database_in_use_is_never_closed_to_make_room(&backend);
            }
            #[test]
            fn concurrent_opens_of_one_closed_database_share_one_handle() {
                let Some(backend) = $open() else { return };
                $crate::many_databases::concurrent_opens_of_one_closed_database_share_one_handle(&backend);
            }
            #[test]
            fn closed_databases_keep_their_log_files_and_reopen_with_their_data() {
                let Some(backend) = $open() else { return };
                $crate::many_databases::closed_databases_keep_their_log_files_and_reopen_with_their_data(&backend);
            }
        }
    };
}
